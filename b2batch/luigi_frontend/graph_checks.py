"""Checks of a graph before luigi's worker runs it: outputs declared by two different tasks (their runs would
overwrite each other's files), and task classes with an attribute that looks like a misspelt setting.

A batch run with the local scheduler does both in its graph runner, and stops before it submits two tasks
that declare one output; runs driven by luigi's worker are checked here, before they start, with a warning
each. A misspelt setting on a task class stops every kind of run, before anything runs or is submitted.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator
from typing import Any

import luigi
import luigi.task

from b2batch.jobscript import base_folder
from b2batch.errors import SettingError
from b2batch.settings import misspelt_setting_error, misspelt_settings

logger = logging.getLogger(__name__)

#: At most this many shared paths are named one by one; the rest are counted.
SHOWN = 10


def output_paths(task: Any) -> list[str]:
    """The paths of ``task``'s outputs (targets without a path by their text)."""
    return [str(getattr(target, "path", target)) for target in luigi.task.flatten(task.output())]


def graph(tasks: Iterable[Any]) -> Iterator[tuple[Any, list[str]]]:
    """Every task of the graph of ``tasks`` once, with its output paths. The graph is walked through
    ``requires()`` without asking any task whether it is complete; a task whose ``output()`` or
    ``requires()`` raises is passed over (the run reports it where it fails)."""
    seen: set[str] = set()
    stack = list(tasks)
    while stack:
        task = stack.pop()
        if task.task_id in seen:
            continue
        seen.add(task.task_id)
        try:
            paths = output_paths(task)
            requirements = luigi.task.flatten(task.requires())
        except Exception:  # noqa: BLE001 - the run itself reports a broken task
            continue
        yield task, paths
        stack.extend(r for r in requirements if isinstance(r, luigi.Task) and r.task_id not in seen)


def shared_outputs(walked: Iterable[tuple[Any, list[str]]]) -> Iterator[tuple[str, Any, Any]]:
    """Each output path that two different tasks declare: the path and both tasks."""
    owners: dict[str, Any] = {}
    for task, paths in walked:
        for path in paths:
            owner = owners.setdefault(path, task)
            if owner is not task and owner.task_id != task.task_id:
                yield path, owner, task


def check_task_class(cls: type) -> None:
    """Stop the run (:class:`SettingError`) when the task class ``cls`` has an attribute that looks like a
    misspelt setting: one the class's code does not use, no luigi parameter, no method taking arguments."""
    for name, meant in misspelt_settings(cls, stop=(luigi.Task,),
                                         own=lambda _name, value: isinstance(value, luigi.Parameter)):
        raise SettingError(misspelt_setting_error(cls, name, meant))


def check_graph(tasks: Iterable[Any], walked: list[tuple[Any, list[str]]] | None = None) -> int:
    """Stop at a misspelt setting on a task class of the graph of ``tasks`` (:func:`check_task_class`); warn
    about each output path two tasks declare; how many such paths there are. ``walked``: the graph, walked
    already."""
    walked = list(graph(tasks)) if walked is None else walked
    for cls in dict.fromkeys(type(task) for task, _paths in walked):
        check_task_class(cls)
    count = 0
    for path, first, second in shared_outputs(walked):
        count += 1
        if count <= SHOWN:
            logger.warning("Tasks %s and %s both declare the output %s: one overwrites the other's. Give the "
                           "tasks parameters (or output file names) that tell their outputs apart. In a --batch "
                           "run, where their jobs would write it at the same time, this stops the run.",
                           first, second, path)
    if count > SHOWN:
        logger.warning("%d more output paths are declared by two tasks each.", count - SHOWN)
    return count


#: The folders a job writes into from the node: a run stops before it submits a job whose folder cannot be
#: written, instead of losing every job's logs (log_dir) or outputs (result_dir).
WRITTEN_FOLDERS = ("log_dir", "result_dir")


def check_writable_folders(task: Any, config: Any) -> None:
    """Stop with one line when ``task``'s log_dir or result_dir (a local folder) cannot be made or written;
    ``config``: the task's JobConfig (its resolver's values)."""
    for name in WRITTEN_FOLDERS:
        value = config[name]
        if not value or "://" in str(value):
            continue  # unset, or remote storage (checked where it is used)
        folder = base_folder.resolve(value)
        why = _unwritable(folder)
        if why:
            raise SettingError(f"Task {task}: the setting '{name}' is {str(value)!r}, and the folder {folder} cannot "
                               f"be written ({why}). Set {name} to a folder you can write; nothing was submitted.")


def _unwritable(folder: Any) -> str:
    """Why ``folder`` cannot be made or written into; "" if it can. Nothing is left behind: a folder is made and
    removed again in its nearest existing parent (the run makes the folder itself when a job needs it)."""
    import tempfile

    parent = os.fspath(folder)
    while not os.path.exists(parent) and os.path.dirname(parent) != parent:
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        return f"{parent} is not a folder"
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".b2batch-check-", dir=parent))
    except OSError as e:
        return e.strerror or type(e).__name__
    return ""
