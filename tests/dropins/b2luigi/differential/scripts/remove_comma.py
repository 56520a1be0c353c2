# --remove-only with two classes joined by a comma (b2luigi's one value per flag).
# args:
# args: --remove-only Raw,Plot -y
# args: --dry-run
import b2luigi

from chain_tasks import Plot


if __name__ == "__main__":
    b2luigi.process(Plot(), workers=1)
