"""Task outputs under a remote ``result_dir`` (``root://host//path``, ``davs://host/path``): their targets,
and the upload of what ``on_temporary_files`` wrote locally.

File systems are made once per server and retry policy in a process (a client keeps its connection), when
first needed; they hold no state of the workflow.
"""

from __future__ import annotations

import functools
from typing import Any

from b2batch.remote import urls
from b2batch.remote.base import RemoteFileSystem, RemoteTarget
from b2batch.remote.backoff import RetryPolicy

#: The setting with the number of tries of a remote operation (``RetryPolicy.attempts``).
RETRIES_SETTING = "remote_retries"


def retry_policy(task: Any = None) -> RetryPolicy:
    """The retry policy of ``task``'s remote operations, from the setting ``remote_retries``."""
    from b2batch.errors import SettingError
    from b2batch.settings import get_setting

    attempts = get_setting(RETRIES_SETTING, default=RetryPolicy.attempts, task=task)
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


def file_system_for(url: str, task: Any = None) -> RemoteFileSystem:
    """The file system of the server of ``url`` (XRootD or WebDAV by its scheme)."""
    parsed = urls.parse(url)
    return _file_system(parsed.server, parsed.kind, retry_policy(task))


def target_for(url: str, root: str | None = None, task: Any = None) -> RemoteTarget:
    """The target of the remote file ``url``; ``root`` is its result folder (listed at once in bulk checks)."""
    fs = file_system_for(url, task)
    if urls.parse(url).kind == "xrootd":
        from b2batch.remote.xrootd import XRootDTarget

        return XRootDTarget(url, fs, root=root)
    from b2batch.remote.webdav import WebDAVTarget

    return WebDAVTarget(url, fs, root=root)


def upload(local_path: str, url: str, task: Any = None) -> None:
    """Upload a finished local file to ``url`` atomically (a temporary remote name, then a rename)."""
    file_system_for(url, task).put_atomically(local_path, url)


def remove(url: str, task: Any = None) -> None:
    file_system_for(url, task).remove(url)
