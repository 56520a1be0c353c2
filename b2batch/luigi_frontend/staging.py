"""Inputs read from copies under ``scratch_dir``, as b2luigi's ``on_temporary_files`` does by default.

While a :class:`StagedInputs` is active, a task's ``get_input_file_names``, ``get_all_input_file_names`` and
``get_input_file_names_from_dict`` give the paths of copies of the inputs, each in a new folder under
``scratch_dir`` (the system's temporary folder without it); a copy is made when its key is first asked
for, by up to ``n_download_threads`` threads at once (default 2), and removed when the staging ends. A
remote input is downloaded (its target's ``get_temporary_input``). The task's ``scratch_dir`` and
``n_download_threads`` come from the :class:`~.file_settings.FileSettings` its ``on_temporary_files`` resolved.

b2batch's own ``on_temporary_files`` reads inputs where they are; under the b2luigi profile it stages them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from b2batch.luigi_frontend.file_settings import FileSettings

#: The task methods that give input paths, replaced on the task while the staging is active.
STAGED_METHODS = ("get_input_file_names", "get_all_input_file_names", "get_input_file_names_from_dict")


@contextlib.contextmanager
def scratch_folder(scratch_dir: str | None = None, **tmp_file_kwargs: Any) -> Iterator[str]:
    """A new folder under ``scratch_dir`` (a task's; the system's temporary folder when it is not set),
    made with its parents, and removed with everything in it when the block ends."""
    parent = os.path.expanduser(str(scratch_dir or tempfile.gettempdir()))
    try:
        os.makedirs(parent, exist_ok=True)
        folder = tempfile.TemporaryDirectory(dir=parent, **tmp_file_kwargs)
    except PermissionError as error:
        raise PermissionError(
            f"You do not have the permission to write to the temporary directory {parent}! Choose a folder you "
            f"can write to as the setting 'scratch_dir', e.g. b2luigi.set_setting('scratch_dir', "
            f"'/path/to/scratch').") from error
    with folder as path:
        yield path


@contextlib.contextmanager
def local_copy(path: str, name: str, scratch_dir: str | None = None, **tmp_file_kwargs: Any) -> Iterator[str]:
    """A copy of the local file (or folder) ``path``, named ``name`` in a new folder under ``scratch_dir``;
    removed when the block ends."""
    with scratch_folder(scratch_dir, **tmp_file_kwargs) as folder:
        copy = os.path.join(folder, name.rstrip("/"))
        if os.path.isdir(path):
            shutil.copytree(path, copy)
        else:
            shutil.copy(path, copy)
        yield copy


def _temporary_input(target: Any, settings: FileSettings, **tmp_file_kwargs: Any) -> Any:
    """The context of a copy of ``target``: its own ``get_temporary_input`` for the task (b2luigi's and
    b2batch's targets, remote ones download), else a copy of its local ``path`` under its own name under the
    task's scratch_dir (a plain luigi target)."""
    if hasattr(target, "get_temporary_input"):
        return target.get_temporary_input(task=settings.task, **tmp_file_kwargs)
    path = str(target.path)
    return local_copy(path, os.path.basename(path.rstrip("/")), settings.scratch_dir, **tmp_file_kwargs)


class StagedInputs:
    """Replace the input-path methods of ``task`` (:data:`STAGED_METHODS`) with ones that give copies; the
    copies' contexts are entered on ``stack`` (so they are removed when it closes), under the scratch_dir of
    ``settings`` (the task's), ``settings.download_threads`` at once. :meth:`restore` puts the task's own
    methods back."""

    def __init__(self, task: Any, stack: contextlib.ExitStack, settings: FileSettings | None = None) -> None:
        self._task = task
        self._stack = stack
        self._settings = settings if settings is not None else FileSettings(task)
        #: The copies by key (``<requirement key>_<key>`` for get_input_file_names_from_dict), as b2luigi keeps them.
        self._copies: dict[str, list[str]] = {}
        self._replaced: dict[str, Any] = {}

    def install(self) -> StagedInputs:
        for name in STAGED_METHODS:
            self._replaced[name] = self._task.__dict__.get(name)
            setattr(self._task, name, getattr(self, name))
        return self

    def restore(self) -> None:
        for name, before in self._replaced.items():
            if before is None:
                self._task.__dict__.pop(name, None)
            else:
                setattr(self._task, name, before)
        self._replaced.clear()

    # --- the replaced methods -------------------------------------------------------------------------------
    def get_input_file_names(self, key: str | None = None, **tmp_file_kwargs: Any) -> Any:
        """Copies of the inputs of ``key`` (a list); without a key ``{key: [copies]}`` of every input."""
        if key is None:
            return {name: self.get_input_file_names(name, **tmp_file_kwargs) for name in self._targets(None)}
        if key not in self._copies:
            self._copies[key] = self._copy_all(self._task._get_input_targets(key), tmp_file_kwargs)
        return self._copies[key]

    def get_all_input_file_names(self, **tmp_file_kwargs: Any) -> list[list[str]]:
        """As b2luigi 1.3.0 gives it inside ``on_temporary_files``: the lists of copies, one per key asked for so
        far (every input key is copied now)."""
        for key, targets in self._targets(None).items():
            if key not in self._copies:
                self._copies[key] = self._copy_all(targets, tmp_file_kwargs)
        return list(self._copies.values())

    def get_input_file_names_from_dict(self, requirement_key: str, key: str | None = None,
                                       **tmp_file_kwargs: Any) -> list[str]:
        """Copies of the inputs of the requirement ``requirement_key`` (of those named ``key``, if given)."""
        internal = f"{requirement_key}_{key}"
        if internal not in self._copies:
            targets = self._targets(requirement_key)
            chosen = targets[key] if key is not None else [t for group in targets.values() for t in group]
            self._copies[internal] = self._copy_all(chosen, tmp_file_kwargs)
        return self._copies[internal]

    # --- helpers ----------------------------------------------------------------------------------------------
    def _targets(self, requirement_key: str | None) -> dict[Any, list[Any]]:
        return self._task._get_input_targets_by_key(requirement_key)

    def _copy_all(self, targets: list[Any], tmp_file_kwargs: dict[str, Any]) -> list[str]:
        enter: Callable[[Any], str] = lambda target: self._stack.enter_context(  # noqa: E731
            _temporary_input(target, self._settings, **tmp_file_kwargs))
        threads = self._settings.download_threads
        if threads is None or len(targets) < 2:
            return [enter(target) for target in targets]
        with ThreadPoolExecutor(max_workers=int(threads)) as pool:
            return list(pool.map(enter, targets))
