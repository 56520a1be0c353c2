"""``b2luigi.core.target``: b2luigi's local file target is b2batch's ``LocalTarget`` (a ``luigi.LocalTarget``
whose ``temporary_path()`` writes next to the final path and moves into place)."""

from b2batch import LocalTarget

FileSystemTarget = LocalTarget

__all__ = ["FileSystemTarget", "LocalTarget"]
