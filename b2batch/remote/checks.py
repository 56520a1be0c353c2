"""Batched existence checks: while :func:`bulk_checks` is active, whether a remote output exists is answered
from one listing of its result folder (or of its own folder), not from one round trip per file.

``--dry-run``, ``--show-output``, ``--remove`` and ``b2batch show`` look at thousands of outputs at one moment
and use it. Outside it (a running workflow, whose outputs appear while it runs) each check asks the server.
The listings live in the active session only (a context variable), never longer.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Iterator
from typing import Any

logger = logging.getLogger(__name__)


class _Session:
    """The folders listed so far, per server: ``{(server, folder): (recursive, {path: is_folder} or None)}``."""

    def __init__(self) -> None:
        self.listings: dict[tuple[str, str], tuple[bool, dict[str, bool] | None]] = {}

    def exists(self, fs: Any, path: str, root: str | None = None) -> bool:
        server = fs.server_path
        found = self._covering(server, path)
        if found is _MISSING:
            folder, recursive = path.rsplit("/", 1)[0] or "/", False
            if root is not None and path.startswith(root.rstrip("/") + "/"):
                folder, recursive = root, True
            logger.debug("Listing %s once for the existence of its outputs", fs.url(folder))
            listing = fs.list_tree(folder, recursive=recursive)
            self.listings[(server, folder)] = (recursive, listing)
            found = listing is not None and path in listing
        return bool(found)

    def _covering(self, server: str, path: str) -> Any:
        """Whether a listing made so far holds ``path``; _MISSING if none covers it."""
        folder, direct = path, True
        while folder != "/":
            folder = folder.rsplit("/", 1)[0] or "/"
            recursive, listing = self.listings.get((server, folder), (False, _MISSING))
            if listing is not _MISSING and (recursive or direct):
                return listing is not None and path in listing
            if listing is None:  # a folder above is missing: so is everything below it
                return False
            direct = False
        return _MISSING

    def forget(self, server: str, path: str) -> None:
        """Drop what is known of ``path`` (it was removed)."""
        for (listed_server, _folder), (_recursive, listing) in self.listings.items():
            if listed_server == server and listing:
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
    from b2batch.remote.retry import RemoteError

    try:
        with bulk_checks():
            yield
    except RemoteError as error:
        raise SystemExit(f"ERROR: {error}") from error


def forget(fs: Any, path: str) -> None:
    session = _session.get()
    if session is not None:
        session.forget(fs.server_path, path)
