"""The workflow's base folder, which relative folders of settings are relative to: the folder of the workflow
script (``__main__``), or the working directory when there is none; ``$B2BATCH_BASE_DIR`` names another one
(a notebook's, a test's, a program that embeds a workflow). A job gets the steering process's base folder
(pinned), so a node with another working directory lays files out in the same places. (Where a luigi task's
files go is ``b2batch.luigi_frontend.layout``.)
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections.abc import Iterator
from pathlib import Path

_pinned_base_dir: str | None = None
#: The environment variable that names the base folder (below a pinned one, above the script's folder).
BASE_DIR_VARIABLE = "B2BATCH_BASE_DIR"
_ENCODED_VARIABLE = os.fsencode(BASE_DIR_VARIABLE)

#: Public (``b2batch.PUBLIC_MODULES``): what code outside b2batch (the b2luigi shim, plugins) may import.
__all__ = ["BASE_DIR_VARIABLE", "base_dir", "base_dir_pinned", "given_base_dir", "pin_base_dir", "pinned_base_dir",
           "resolve"]


def base_dir() -> Path:
    """The folder relative paths of settings are relative to."""
    if _pinned_base_dir is not None:
        return Path(_pinned_base_dir)
    named = _named_base_dir()
    if named:
        return Path(named)
    main_file = getattr(sys.modules.get("__main__"), "__file__", None)
    if main_file:
        return _script_folder(main_file, "" if os.path.isabs(main_file) else os.getcwd())
    return Path.cwd()


def _named_base_dir() -> str | None:
    """``$B2BATCH_BASE_DIR``: asked for every output path, so read from os.environ's bytes mapping where CPython
    has one (os.environ.get encodes the key each time)."""
    data = getattr(os.environ, "_data", None)
    if isinstance(data, dict):
        value = data.get(_ENCODED_VARIABLE)
        return os.fsdecode(value) if value else None
    return os.environ.get(BASE_DIR_VARIABLE) or None


@functools.lru_cache(maxsize=16)
def _script_folder(main_file: str, cwd: str) -> Path:
    """The resolved folder of the workflow script (asked for every output path: resolving symbolic links
    each time would cost a system call per path component)."""
    return (Path(cwd) / main_file).resolve().parent


def given_base_dir() -> str | None:
    """The base folder when it is given (pinned with :func:`pin_base_dir`, else named by ``$B2BATCH_BASE_DIR``),
    not the script's or the working directory; else None."""
    return _pinned_base_dir if _pinned_base_dir is not None else _named_base_dir()


def pinned_base_dir() -> str | None:
    """The base folder fixed with :func:`pin_base_dir` (in a job: the steering process's), or None."""
    return _pinned_base_dir


def pin_base_dir(path: str | None) -> None:
    """Fix the base folder (used in jobs, where it is the steering process's one)."""
    global _pinned_base_dir
    _pinned_base_dir = path


@contextlib.contextmanager
def base_dir_pinned(path: str | None) -> Iterator[None]:
    """Fix the base folder for the ``with`` block, and put back the one before it afterwards."""
    previous = _pinned_base_dir
    pin_base_dir(path)
    try:
        yield
    finally:
        pin_base_dir(previous)


def resolve(path: str | os.PathLike[str]) -> Path:
    """``path`` made absolute against :func:`base_dir`, with ``~`` expanded."""
    p = Path(os.path.expanduser(os.fspath(path)))
    return p if p.is_absolute() else base_dir() / p
