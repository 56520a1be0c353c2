"""Temporary outputs: b2luigi's temporary names, and ``on_temporary_files``, which writes a task's outputs
under them and moves them into place only when ``run()`` returns normally. Each ``run()`` resolves the task's
file settings once (:class:`~.file_settings.FileSettings`: scratch_dir, remote_retries, n_download_threads)."""

from __future__ import annotations

import contextlib
import functools
import os
import random
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from b2batch.jobscript import base_folder
from b2batch.luigi_frontend.file_settings import FileSettings
from b2batch.settings import active_profile

#: Public (``b2batch.PUBLIC_MODULES``): what code outside b2batch (the b2luigi shim, plugins) may import.
__all__ = ["on_temporary_files", "temporary_files", "temporary_name"]

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
    """Temporary paths for outputs, moved into place only on success: under the task's scratch_dir (of
    ``settings``), remote ones uploaded with its retry policy."""

    def __init__(self, settings: FileSettings) -> None:
        self._settings = settings
        scratch_dir = settings.scratch_dir
        self._scratch = base_folder.resolve(scratch_dir) if scratch_dir else None
        self._made: dict[Path, Path] = {}
        self._folders: list[Path] = []  # the temporary folders made under scratch_dir
        self._remote: dict[str, Path] = {}  # remote URL: local temporary file
        self._own: dict[str, str] = {}  # path of a target that uploads itself: its local temporary path
        self._own_contexts = contextlib.ExitStack()

    def path_for_own_target(self, target: Any, task: Any) -> str | None:
        """For a remote target on a file system written for b2luigi (``on_foreign_system``): the local path
        of its own ``temporary_path()``, which uploads it on commit; None for any other target."""
        if not getattr(target, "on_foreign_system", False):
            return None
        if target.path not in self._own:
            self._own[target.path] = self._own_contexts.enter_context(target.temporary_path(task=task))
        return self._own[target.path]

    def path_for_remote(self, url: str) -> Path:
        if url not in self._remote:
            if self._scratch is not None:
                self._scratch.mkdir(parents=True, exist_ok=True)
            folder = Path(tempfile.mkdtemp(prefix="b2batch-upload-", dir=self._scratch))
            self._remote[url] = folder / (url.rstrip("/").rsplit("/", 1)[-1] or "output")
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
        try:
            self._commit()
        except BaseException:  # a failed upload: what was not moved into place is removed, as after run() failed
            self.discard()
            raise

    def _commit(self) -> None:
        self._own_contexts.close()
        if self._remote:
            from b2batch.remote import outputs

            for url, local in self._remote.items():
                if local.exists():
                    outputs.upload(str(local), url, self._settings.retry)
            self._remove_uploads()
        for final, temporary in self._made.items():
            if temporary.exists():
                final.parent.mkdir(parents=True, exist_ok=True)
                if final.exists() and final.is_dir():
                    shutil.rmtree(final)
                shutil.move(str(temporary), str(final))
        self._remove_folders()

    def _remove_uploads(self) -> None:
        for local in self._remote.values():  # each in a folder of its own (path_for_remote)
            shutil.rmtree(local.parent, ignore_errors=True)

    def _remove_folders(self) -> None:
        for folder in self._folders:
            shutil.rmtree(folder, ignore_errors=True)

    def discard(self) -> None:
        failed = RuntimeError("run() failed")
        self._own_contexts.__exit__(RuntimeError, failed, None)  # the targets' contexts do not upload
        self._remove_uploads()
        for temporary in self._made.values():
            with contextlib.suppress(FileNotFoundError):
                _remove_path(temporary)
        self._remove_folders()


def on_temporary_files(run: F | None = None, *, inputs: bool = True, outputs: bool = True) -> Any:
    """Decorate ``run()`` so that its outputs are written to temporary paths and moved into place only when
    it returns normally; when it raises, the temporary files are removed and no partial output remains.

    Also with b2luigi 1.3's options, ``@on_temporary_files(outputs=False)``: outputs are then written in
    place. ``inputs``: b2batch reads inputs where they are; under the b2luigi profile (a workflow that
    imports b2luigi) they are read from copies under scratch_dir, as b2luigi does (:mod:`.staging`),
    unless ``inputs=False``."""
    if run is None:
        return functools.partial(on_temporary_files, inputs=inputs, outputs=outputs)
    if not callable(run):  # @on_temporary_files(False): the options are keywords only
        raise TypeError(f"on_temporary_files() takes the decorated run() as its only positional argument, not "
                        f"{run!r}; give the options as keywords, e.g. @on_temporary_files(outputs=False).")

    @functools.wraps(run)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        with temporary_files(self, inputs=inputs and active_profile() == "b2luigi", outputs=outputs):
            return run(self, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


@contextlib.contextmanager
def temporary_files(task: Any, inputs: bool, outputs: bool) -> Iterator[None]:
    """Within the block, ``task``'s outputs are temporary paths (``outputs``), moved into place when it ends
    without an exception and removed when it raises; and its inputs are copies under scratch_dir
    (``inputs``), removed at the end."""
    from b2batch.luigi_frontend.staging import StagedInputs

    settings = FileSettings(task)
    temporary = _TemporaryOutputs(settings) if outputs else None
    with contextlib.ExitStack() as stack:
        staged = StagedInputs(task, stack, settings).install() if inputs else None
        if temporary is not None:
            task._b2batch_temporary = temporary
        try:
            yield
        except BaseException:
            if temporary is not None:
                temporary.discard()
            raise
        finally:
            if temporary is not None:
                task._b2batch_temporary = None
            if staged is not None:
                staged.restore()
        if temporary is not None:
            temporary.commit()
