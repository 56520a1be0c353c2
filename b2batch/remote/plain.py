"""A :class:`~b2batch.remote.base.RemoteTarget` on a file system that is not one of b2batch's: one written for
b2luigi (a ``RemoteFileSystem`` subclass that implements the public methods ``exists``,
``copy_file_from_remote``, ``mkdir``, ...), or a stand-in in a test. The target keeps its path as given and
calls those methods as b2luigi 1.3's ``RemoteTarget`` does: no URLs, retries or batched checks, which need
b2batch's single attempts. The scratch folder is given (the target's method found it for its task).
"""

from __future__ import annotations

import contextlib
import os
import random
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def base_name(target: Any) -> str:
    return Path(target.path).name


def tmp_name(path: str) -> str:
    """b2luigi's temporary name of ``path``: ``<name up to its first dot>-luigi-tmp-<10 digits><extensions>``."""
    base, dot, extensions = os.path.basename(path).partition(".")
    return f"{base}-luigi-tmp-{random.randrange(10_000_000_000):010}{dot}{extensions}"


def makedirs(target: Any) -> None:
    target.fs.mkdir(str(Path(target.path).parent))


def get(target: Any, path: str = "~") -> str:
    """Download into the folder ``path`` (given to the file system as it is); the local file's path."""
    local = str(Path(path) / base_name(target))
    target.fs.copy_file_from_remote(target.path, local)
    return local


def _scratch_folder(scratch: str | None, **kwargs: Any) -> tempfile.TemporaryDirectory[str]:
    """A new folder under ``scratch`` (the task's scratch_dir; the system's temporary folder without it)."""
    parent = os.path.expanduser(str(scratch or tempfile.gettempdir()))
    os.makedirs(parent, exist_ok=True)
    return tempfile.TemporaryDirectory(dir=parent, **kwargs)


@contextlib.contextmanager
def get_temporary_input(target: Any, scratch: str | None = None, **kwargs: Any) -> Iterator[str]:
    """A downloaded copy in a new folder under ``scratch`` (the system's temporary folder without it)."""
    with _scratch_folder(scratch) as folder:
        local = str(Path(folder) / base_name(target))
        target.fs.copy_file_from_remote(target.path, local)
        yield local


@contextlib.contextmanager
def temporary_path(target: Any, scratch: str | None = None, **kwargs: Any) -> Iterator[str]:
    """A local path (b2luigi's temporary name) to write to, in a new folder under ``scratch`` (the system's
    temporary folder without it); handed to the file system's ``rename_dont_move`` when the block ends
    without an exception (b2luigi's RemoteFileSystem uploads it there with ``force=True``). The target's
    folder is made first."""
    target.makedirs()  # b2luigi's worker makes the output folders of a task before it runs
    with _scratch_folder(scratch, **kwargs) as folder:
        local = os.path.join(folder, tmp_name(target.path))
        yield local
        target.fs.rename_dont_move(local, target.path)


def open_(target: Any, mode: str) -> Any:
    raise NotImplementedError("RemoteTarget does not support open yet.")


__all__ = ["base_name", "get", "get_temporary_input", "makedirs", "open_", "temporary_path", "tmp_name"]
