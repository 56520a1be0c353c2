# The chain in batch mode on b2luigi's test batch system: each task a background process.
# args: --batch
# args: --dry-run
import b2luigi

from chain_tasks import Plot

b2luigi.set_setting("batch_system", "test")


if __name__ == "__main__":
    b2luigi.process(Plot(), workers=1)
