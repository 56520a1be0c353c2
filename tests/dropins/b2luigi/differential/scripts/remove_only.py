# --remove-only Reco -y: only the named class's outputs.
# args:
# args: --remove-only Reco -y
# args: --dry-run
import b2luigi

from chain_tasks import Plot


if __name__ == "__main__":
    b2luigi.process(Plot(), workers=1)
