# --remove Raw --keep Plot -y: the cascade spares the kept class.
# args:
# args: --remove Raw --keep Plot -y
import b2luigi

from chain_tasks import Plot


if __name__ == "__main__":
    b2luigi.process(Plot(), workers=1)
