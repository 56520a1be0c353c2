# process(remove=[...], auto_confirm=True) in code instead of flags.
# args:
# args:
# args: --dry-run
import b2luigi

from chain_tasks import Plot


if __name__ == "__main__":
    import os
    if os.path.exists("plot.txt"):
        b2luigi.process(Plot(), remove=["Reco"], auto_confirm=True)
    b2luigi.process(Plot(), workers=1)
