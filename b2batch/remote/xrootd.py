"""XRootD file system and target (b2luigi's ``XRootDSystem``/``XRootDTarget``), through the official ``xrootd``
Python bindings (``pip install 'b2batch[xrootd]'``).

The bindings return a status instead of raising: an error answered by the server (no such file, no
permission) is final; anything else (no connection, a timeout) is transient and retried. Existence checks of
many files are sent at once, asynchronously, over the one connection the client keeps per server.
"""

from __future__ import annotations

import os
from typing import Any

from b2batch.remote.base import RemoteFileSystem, RemoteTarget
from b2batch.remote.backoff import RemoteError, RetryPolicy, TransientRemoteError

#: XRootD's error number for "no such file or directory" (kXR_NotFound).
_NOT_FOUND = 3011
#: The status code of an error the server answered (errErrorResponse): final, not transient.
_SERVER_ANSWERED = 400
#: How long the client keeps trying to connect before it reports an error (the bindings' default, 120 s
#: times 5 tries, would hide an outage from b2batch's own retries), and how long it refuses to reconnect
#: to a server after a fatal error (default 1800 s: a restarted server would stay unreachable); set unless
#: the environment sets them.
_CLIENT_DEFAULTS = {"ConnectionWindow": ("XRD_CONNECTIONWINDOW", 5), "ConnectionRetry": ("XRD_CONNECTIONRETRY", 1),
                    "StreamErrorWindow": ("XRD_STREAMERRORWINDOW", 1)}


def _bindings() -> Any:
    try:
        from XRootD import client
    except ImportError as error:
        raise RemoteError(
            "XRootD outputs (root:// URLs, XRootDSystem) need the XRootD Python bindings, which are not "
            "installed: install b2batch's extra with  pip install 'b2batch[xrootd]'  (or  pip install xrootd)."
        ) from error
    for name, (variable, value) in _CLIENT_DEFAULTS.items():
        if variable not in os.environ:
            client.EnvPutInt(name, value)
    return client


class XRootDSystem(RemoteFileSystem):
    """An XRootD server: ``XRootDSystem("root://eosuser.cern.ch")``. ``timeout`` (s) bounds each request."""

    kind = "XRootD"

    def __init__(self, server_path: str, *, retry: RetryPolicy | None = None, timeout: int = 60) -> None:
        super().__init__(server_path, retry=retry)
        client = _bindings()
        from XRootD.client.flags import DirListFlags, MkDirFlags, StatInfoFlags
        from XRootD.client.utils import AsyncResponseHandler

        self._flags = (DirListFlags, MkDirFlags, StatInfoFlags)
        self._handler_class = AsyncResponseHandler
        self._bindings = client
        self._client: tuple[int, Any] | None = None
        self.timeout = timeout

    @property
    def client(self) -> Any:
        """The XRootD client of this process (a forked worker must not share its parent's connections)."""
        if self._client is None or self._client[0] != os.getpid():
            self._client = (os.getpid(), self._bindings.FileSystem(self._server.server))
        return self._client[1]

    @client.setter
    def client(self, value: Any) -> None:
        """Use ``value`` as this process's client (b2luigi's attribute, which code and tests may replace)."""
        self._client = (os.getpid(), value)

    def _check(self, status: Any, operation: str, path: str, missing_ok: bool = False) -> bool:
        """True if the operation succeeded, False if ``missing_ok`` and the path does not exist."""
        if status.ok:
            return True
        if missing_ok and status.errno == _NOT_FOUND:
            return False
        message = f"{operation} {self.url(path)}: {status.message.strip()}"
        if status.code == _SERVER_ANSWERED:
            raise RemoteError(f"The XRootD server refused to {message} (errno {status.errno}).")
        raise TransientRemoteError(message)

    def _kind(self, status: Any, info: Any, path: str) -> bool | None:
        if not self._check(status, "stat", path, missing_ok=True):
            return None
        return info is not None and bool(info.flags & self._flags[2].IS_DIR)

    def _stat(self, path: str) -> bool | None:
        status, info = self.client.stat(path, timeout=self.timeout)
        return self._kind(status, info, path)

    def _stat_many(self, paths: list[str]) -> dict[str, bool | None]:
        """All stat requests sent at once; the answers collected as they come."""
        found: dict[str, bool | None] = {}
        for start in range(0, len(paths), 2000):
            batch = paths[start:start + 2000]
            handlers = []
            for path in batch:
                handler = self._handler_class()
                self.client.stat(path, timeout=self.timeout, callback=handler)
                handlers.append(handler)
            for path, handler in zip(batch, handlers):
                status, info, _hosts = handler.wait()
                found[path] = self._kind(status, info, path)
        return found

    def _list(self, path: str, recursive: bool) -> dict[str, bool] | None:
        dir_flags, _mk, stat_flags = self._flags
        flags = dir_flags.STAT | (dir_flags.RECURSIVE if recursive else 0)
        status, listing = self.client.dirlist(path, flags, timeout=self.timeout)
        if not self._check(status, "list", path, missing_ok=True):
            return None
        parent = listing.parent.rstrip("/")
        return {f"{parent}/{entry.name}": bool(entry.statinfo.flags & stat_flags.IS_DIR) for entry in listing}

    def _upload(self, local_path: str, path: str) -> None:
        status, _ = self.client.copy("file://" + os.path.abspath(local_path), self.url(path), force=True)
        self._check(status, "upload to", path)

    def _download(self, path: str, local_path: str) -> None:
        status, _ = self.client.copy(self.url(path), os.path.abspath(local_path), force=True)
        self._check(status, "download", path)

    def _move(self, source: str, destination: str) -> None:
        status, _ = self.client.mv(source, destination, timeout=self.timeout)
        self._check(status, f"rename to {destination}:", source)

    def _mkdir(self, path: str) -> None:
        status, _ = self.client.mkdir(path, self._flags[1].MAKEPATH, timeout=self.timeout)
        self._check(status, "make the folder", path)

    def _remove_file(self, path: str) -> None:
        status, _ = self.client.rm(path, timeout=self.timeout)
        self._check(status, "remove", path, missing_ok=True)

    def _remove_empty_dir(self, path: str) -> None:
        status, _ = self.client.rmdir(path, timeout=self.timeout)
        self._check(status, "remove the folder", path, missing_ok=True)


class XRootDTarget(RemoteTarget):
    """A file on an XRootD server: ``XRootDTarget(path, file_system)``, as in b2luigi."""

