"""Task outputs under a remote ``result_dir`` (``root://host//path``, ``davs://host/path``): their targets,
and the upload of what ``on_temporary_files`` wrote locally.

File systems are made once per server and retry policy in a process (a client keeps its connection), when
first needed; they hold no state of the workflow. The retry policy is a value the front-end resolved from the
task's setting ``remote_retries`` (:mod:`b2batch.luigi_frontend.file_settings`): nothing here looks a setting up.
"""

from __future__ import annotations

import functools
from typing import Any

from b2batch.remote import urls
from b2batch.remote.base import RemoteFileSystem, RemoteTarget
from b2batch.remote.backoff import RetryPolicy

#: The setting with the number of tries of a remote operation (``RetryPolicy.attempts``).
RETRIES_SETTING = "remote_retries"


def retry_policy(attempts: Any, task: Any = None) -> RetryPolicy:
    """The retry policy of ``attempts`` tries (the value of ``task``'s setting ``remote_retries``, as its
    front-end resolved it); a :class:`SettingError` naming the task, the value and the fix when it is no whole
    number of at least 1."""
    from b2batch.errors import SettingError

    if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
        owner = f"Task {task}: the" if task is not None else "The"
        raise SettingError(f"{owner} setting {RETRIES_SETTING!r} is {attempts!r}, but it must be a whole number "
                           f"of at least 1 (tries of each remote operation). Fix it, e.g. "
                           f"{RETRIES_SETTING!r}: {RetryPolicy.attempts} (its default).")
    return RetryPolicy(attempts=attempts)


@functools.lru_cache(maxsize=32)
def _file_system(server: str, kind: str, policy: RetryPolicy) -> RemoteFileSystem:
    if kind == "xrootd":
        from b2batch.remote.xrootd import XRootDSystem

        return XRootDSystem(server, retry=policy)
    from b2batch.remote.webdav import WebDAVSystem

    return WebDAVSystem(server, retry=policy)


def file_system_for(url: str, retry: RetryPolicy | None = None) -> RemoteFileSystem:
    """The file system of the server of ``url`` (XRootD or WebDAV by its scheme), retrying by ``retry``
    (:class:`RetryPolicy`'s defaults without one)."""
    parsed = urls.parse(url)
    return _file_system(parsed.server, parsed.kind, retry or RetryPolicy())


def target_for(url: str, root: str | None = None, retry: RetryPolicy | None = None) -> RemoteTarget:
    """The target of the remote file ``url``; ``root`` is its result folder (listed at once in bulk checks)."""
    fs = file_system_for(url, retry)
    if urls.parse(url).kind == "xrootd":
        from b2batch.remote.xrootd import XRootDTarget

        return XRootDTarget(url, fs, root=root)
    from b2batch.remote.webdav import WebDAVTarget

    return WebDAVTarget(url, fs, root=root)


def upload(local_path: str, url: str, retry: RetryPolicy | None = None) -> None:
    """Upload a finished local file to ``url`` atomically (a temporary remote name, then a rename)."""
    file_system_for(url, retry).put_atomically(local_path, url)


def remove(url: str, retry: RetryPolicy | None = None) -> None:
    file_system_for(url, retry).remove(url)
