# --remove before anything ran: nothing to remove.
# args: --remove Reco -y
import b2luigi

from chain_tasks import Plot


if __name__ == "__main__":
    b2luigi.process(Plot(), workers=1)
