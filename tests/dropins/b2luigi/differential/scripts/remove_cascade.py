# --remove Raw -y: the named class and every task that needs it (b2luigi 1.3's cascade), then a rerun.
# args:
# args: --remove Raw -y
# args: --dry-run
import b2luigi

from chain_tasks import Plot


if __name__ == "__main__":
    b2luigi.process(Plot(), workers=1)
