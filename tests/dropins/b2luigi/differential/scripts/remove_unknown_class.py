# --remove of a class that is not in the graph, with one that is.
# args:
# args: --remove Nope Plot -y
import b2luigi

from chain_tasks import Plot


if __name__ == "__main__":
    b2luigi.process(Plot(), workers=1)
