"""``b2luigi.core.remote_target``: ``RemoteFileSystem`` and ``RemoteTarget``, b2batch's (``b2batch.remote``)."""

from b2batch.remote import RemoteFileSystem, RemoteTarget

__all__ = ["RemoteFileSystem", "RemoteTarget"]
