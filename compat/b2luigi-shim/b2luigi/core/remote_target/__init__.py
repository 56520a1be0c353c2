"""``b2luigi.core.remote_target``: ``RemoteFileSystem`` and ``RemoteTarget``, b2batch's (``b2batch.remote``)."""

from b2batch import RemoteTarget
from b2batch.remote import RemoteFileSystem

__all__ = ["RemoteFileSystem", "RemoteTarget"]
