"""Task outputs on remote storage: XRootD and WebDAV file systems and targets, under b2luigi 1.3's names.

A ``result_dir`` of ``root://host//path`` or ``davs://host/path`` puts a workflow's outputs there; or a task
asks for a target class, as in b2luigi: ``self.add_to_output("a.root", XRootDTarget, file_system=fs)``. The
clients are optional extras: ``pip install 'b2batch[xrootd]'`` and ``'b2batch[webdav]'``.
"""

from __future__ import annotations

from b2batch.remote.base import RemoteFileSystem, RemoteTarget
from b2batch.remote.existence import bulk_checks
from b2batch.remote.backoff import RemoteError, RetryPolicy
from b2batch.remote.urls import is_remote

__all__ = ["RemoteError", "RemoteFileSystem", "RemoteTarget", "RetryPolicy", "WebDAVSystem", "WebDAVTarget",
           "XRootDSystem", "XRootDTarget", "bulk_checks", "is_remote"]

_LAZY = {"XRootDSystem": "xrootd", "XRootDTarget": "xrootd", "WebDAVSystem": "webdav", "WebDAVTarget": "webdav"}


def __getattr__(name: str) -> object:
    """The XRootD and WebDAV classes, imported when first used (their clients are optional)."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"b2batch.remote.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'b2batch.remote' has no attribute {name!r}")
