"""Batched existence checks: while :func:`bulk_checks` is active, whether a remote output exists is answered
from one listing of its result folder (or of its own folder), not from one round trip per file.

``--dry-run``, ``--show-output``, ``--remove`` and ``b2batch show`` look at thousands of outputs at one moment
and use it. Outside it (a running workflow, whose outputs appear while it runs) each check asks the server.
The listings live in the active session only (a context variable), never longer.

The first few checks of a session on a server ask for their one file: a complete workflow's ``--dry-run``
only checks its top task, and listing thousands of outputs for it would cost more than the whole run. When
such a file is missing, the workflow will look below it: its result folder is listed at once (recursively)
in a background thread while the workflow makes its tasks, and later checks are answered from that listing.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

logger = logging.getLogger(__name__)

#: Checks of single files per server and session before the session lists folders instead.
SINGLE_CHECKS = 4

_Listing = dict[str, bool] | None  # {path: is_folder} below a folder, None if the folder does not exist


class _Session:
    """The folders listed (or being listed) so far, per server: ``{(server, folder): (recursive, listing)}``,
    and how many single files were checked on each server."""

    def __init__(self) -> None:
        self.listings: dict[tuple[str, str], tuple[bool, Future[_Listing]]] = {}
        self.singles: dict[str, int] = {}

    def exists(self, fs: Any, path: str, root: str | None = None) -> bool:
        """Whether the file or folder ``path`` exists; ``root`` is its result folder (listed recursively)."""
        server = fs.server_path
        found = self._covering(server, path)
        if found is not _MISSING:
            return bool(found)
        folder, recursive = path.rsplit("/", 1)[0] or "/", False
        if root is not None and path.startswith(root.rstrip("/") + "/"):
            folder, recursive = root, True
        if self.singles.get(server, 0) < SINGLE_CHECKS:
            self.singles[server] = self.singles.get(server, 0) + 1
            exists = fs.kind_of(path) is not None
            if not exists:
                self._list(fs, folder, recursive, background=True)
            return exists
        listing = self._list(fs, folder, recursive).result()
        return listing is not None and path in listing

    def _list(self, fs: Any, folder: str, recursive: bool, background: bool = False) -> Future[_Listing]:
        """The listing of ``folder``: made now, or in a daemon thread with ``background`` (a process that ends
        meanwhile does not wait for it)."""
        key = (fs.server_path, folder)
        if key in self.listings:
            return self.listings[key][1]
        future: Future[_Listing] = Future()
        self.listings[key] = (recursive, future)

        def run() -> None:
            logger.debug("Listing %s once for the existence of its outputs", fs.url(folder))
            try:
                future.set_result(fs.list_tree(folder, recursive=recursive))
            except BaseException as error:  # noqa: BLE001 - raised again by the check that waits for it
                future.set_exception(error)

        if background:
            threading.Thread(target=run, name=f"b2batch-list-{folder}", daemon=True).start()
        else:
            run()
        return future

    def _covering(self, server: str, path: str) -> Any:
        """Whether a listing made so far holds ``path``; _MISSING if none covers it."""
        folder, direct = path, True
        while folder != "/":
            folder = folder.rsplit("/", 1)[0] or "/"
            recursive, future = self.listings.get((server, folder), (False, None))
            listing = future.result() if future is not None else _MISSING
            if listing is not _MISSING and (recursive or direct):
                return listing is not None and path in listing
            if listing is None:  # a folder above is missing: so is everything below it
                return False
            direct = False
        return _MISSING

    def forget(self, server: str, path: str) -> None:
        """Drop what is known of ``path`` (it was removed)."""
        for (listed_server, _folder), (_recursive, future) in self.listings.items():
            listing = future.result() if listed_server == server else None
            if listing:
                for entry in [e for e in listing if e == path or e.startswith(path.rstrip("/") + "/")]:
                    del listing[entry]


_MISSING = object()
_session: contextvars.ContextVar[_Session | None] = contextvars.ContextVar("b2batch_remote_checks", default=None)


def current() -> _Session | None:
    """The active session of batched checks, if any."""
    return _session.get()


@contextlib.contextmanager
def bulk_checks() -> Iterator[None]:
    """Answer existence checks of remote outputs from listings while the context lasts (nested: no-op)."""
    if _session.get() is not None:
        yield
        return
    token = _session.set(_Session())
    try:
        yield
    finally:
        _session.reset(token)


@contextlib.contextmanager
def remote_checks() -> Iterator[None]:
    """:func:`bulk_checks` for the commands that look at a workflow's outputs; a remote error (a server still
    unreachable after the retries) ends the program with its message instead of a traceback."""
    from b2batch.remote.backoff import RemoteError

    try:
        with bulk_checks():
            yield
    except RemoteError as error:
        raise SystemExit(f"ERROR: {error}") from error


def forget(fs: Any, path: str) -> None:
    session = _session.get()
    if session is not None:
        session.forget(fs.server_path, path)
