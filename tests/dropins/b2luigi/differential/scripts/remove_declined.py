# --remove without -y, answered no on stdin: nothing is removed.
# stdin: n
# args:
# args: --remove Plot
import b2luigi

from chain_tasks import Plot


if __name__ == "__main__":
    b2luigi.process(Plot(), workers=1)
