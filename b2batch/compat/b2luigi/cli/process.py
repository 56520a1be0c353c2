"""``b2luigi.cli.process``: ``process``, b2batch's."""

from b2batch.luigi_frontend.workflow import process

__all__ = ["process"]
