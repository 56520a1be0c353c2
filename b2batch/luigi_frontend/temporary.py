"""Temporary outputs: b2luigi's temporary names, and ``on_temporary_files``, which writes a task's outputs
under them and moves them into place only when ``run()`` returns normally."""

from __future__ import annotations

import contextlib
import functools
import os
import random
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from b2batch import paths
from b2batch.settings import get_setting

F = TypeVar("F", bound=Callable[..., Any])


def temporary_name(path: str) -> str:
    """b2luigi's temporary file name of ``path``: ``<base>-luigi-tmp-<10 random digits><extensions>``, the
    base being the name up to its first dot (``a.tar.gz``: ``a-luigi-tmp-0123456789.tar.gz``); a trailing
    slash (a folder target) is kept."""
    name = os.path.basename(path.rstrip("/"))
    base, dot, extensions = name.partition(".")
    number = random.randrange(0, 10_000_000_000)
    return f"{base}-luigi-tmp-{number:010}{dot}{extensions}{'/' if path.endswith('/') else ''}"


def _remove_path(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


# --- atomic outputs --------------------------------------------------------------------------------------

class _TemporaryOutputs:
    """Temporary paths for outputs, moved into place only on success."""

    def __init__(self, scratch_dir: str | None) -> None:
        self._scratch = paths.resolve(scratch_dir) if scratch_dir else None
        self._made: dict[Path, Path] = {}
        self._folders: list[Path] = []  # the temporary folders made under scratch_dir
        self._remote: dict[str, Path] = {}  # remote URL: local temporary file

    def path_for_remote(self, url: str) -> Path:
        if url not in self._remote:
            folder = Path(tempfile.mkdtemp(prefix="b2batch-upload-", dir=self._scratch))
            self._remote[url] = folder / url.rsplit("/", 1)[-1]
        return self._remote[url]

    def path_for(self, final: Path) -> Path:
        """The temporary path of the output ``final``: b2luigi's temporary name (:func:`temporary_name`), in
        a folder of its own under scratch_dir when that is set, else next to ``final``."""
        if final not in self._made:
            if self._scratch is not None:
                self._scratch.mkdir(parents=True, exist_ok=True)
                folder = Path(tempfile.mkdtemp(prefix="b2batch-", dir=self._scratch))
                self._folders.append(folder)
            else:
                folder = final.parent
                folder.mkdir(parents=True, exist_ok=True)
            temporary = folder / temporary_name(final.name)
            while temporary.exists() or temporary in self._made.values():
                temporary = folder / temporary_name(final.name)
            self._made[final] = temporary  # the task creates the file (or folder) itself
        return self._made[final]

    def commit(self) -> None:
        if self._remote:
            from b2batch.remote import outputs

            for url, local in self._remote.items():
                if local.exists():
                    outputs.upload(str(local), url)
                shutil.rmtree(local.parent, ignore_errors=True)
        for final, temporary in self._made.items():
            if temporary.exists():
                final.parent.mkdir(parents=True, exist_ok=True)
                if final.exists() and final.is_dir():
                    shutil.rmtree(final)
                shutil.move(str(temporary), str(final))
        self._remove_folders()

    def _remove_folders(self) -> None:
        for folder in self._folders:
            shutil.rmtree(folder, ignore_errors=True)

    def discard(self) -> None:
        for local in self._remote.values():
            shutil.rmtree(local.parent, ignore_errors=True)
        for temporary in self._made.values():
            with contextlib.suppress(FileNotFoundError):
                _remove_path(temporary)
        self._remove_folders()


def on_temporary_files(run: F | None = None, *, inputs: bool = True, outputs: bool = True) -> Any:
    """Decorate ``run()`` so that its outputs are written to temporary paths and moved into place only when
    it returns normally; when it raises, the temporary files are removed and no partial output remains.

    Also with b2luigi 1.3's options, ``@on_temporary_files(outputs=False)``: outputs are then written in
    place. ``inputs`` is accepted; b2batch reads inputs where they are (b2luigi copies them to scratch)."""
    if run is None:
        return functools.partial(on_temporary_files, inputs=inputs, outputs=outputs)
    if not callable(run):  # @on_temporary_files(False): the options are keywords only
        raise TypeError(f"on_temporary_files() takes the decorated run() as its only positional argument, not "
                        f"{run!r}; give the options as keywords, e.g. @on_temporary_files(outputs=False).")
    if not outputs:
        return run

    @functools.wraps(run)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        temporary = _TemporaryOutputs(get_setting("scratch_dir", task=self))
        self._b2batch_temporary = temporary
        try:
            result = run(self, *args, **kwargs)
        except BaseException:
            temporary.discard()
            raise
        finally:
            self._b2batch_temporary = None
        temporary.commit()
        return result

    return wrapper  # type: ignore[return-value]
