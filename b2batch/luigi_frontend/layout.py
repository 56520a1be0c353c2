"""Where a luigi task's files go: outputs under result_dir, logs under log_dir, job files under task_file_dir.

Each folder is ``<dir>/<p1>=<v1>/<p2>=<v2>/...``, built from the task's significant parameters in their
declared order. Relative folders are relative to the workflow's base folder (:mod:`b2batch.jobscript.base_folder`).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from b2batch.jobscript import base_folder
from b2batch.errors import OutputPathError
from b2batch.settings import get_setting, profiled_error

#: Public (``b2batch.PUBLIC_MODULES``): what code outside b2batch (the b2luigi shim, plugins) may import.
__all__ = ["job_folder", "log_folder", "output_path", "parameter_parts", "path_value", "task_folder"]


def parameter_parts(task: Any, strict: bool = True, hidden: bool = False) -> list[str]:
    """The path components that stand for the task's parameters, e.g. ``["energy=10", "seed=3"]``.

    Parameters declared with ``hidden=True`` are left out, those with ``hashed=True`` become
    ``hashed_<md5 of the value>`` (or what their ``hash_function`` makes of the value). A value that cannot be a folder name (one with a path separator, or ``.`` or
    ``..`` without the parameter's name) is an error; with ``strict=False`` (log and job folders, which the
    task does not choose) it is hashed instead. ``hidden``: the hidden parameters too (b2luigi's task files).
    """
    separator = str(get_setting("parameter_separator", task=task))
    with_names = bool(get_setting("use_parameter_name_in_output", task=task))
    as_b2luigi = bool(get_setting("b2luigi_hashing", task=task))
    parts = []
    for name, param in task.get_params():
        if not param.significant or (getattr(param, "hidden", False) and not hidden):
            continue
        value = path_value(param, getattr(task, name), as_b2luigi)
        has_separator = os.sep in value or bool(os.altsep and os.altsep in value)
        is_dot = not with_names and value in (".", "..")
        if not strict and (has_separator or is_dot):
            value = _md5(value)
        elif has_separator:
            raise profiled_error(OutputPathError)(
                f"Task {task.task_family}: the value {value!r} of parameter {name!r} contains a path "
                f"separator and cannot be a folder name in the output path. Declare the parameter with "
                f"hashed=True (the path gets a hash of the value) or hidden=True (left out of the path)."
            )
        elif is_dot:
            raise profiled_error(OutputPathError)(
                f"Task {task.task_family}: the value {value!r} of parameter {name!r} cannot be a folder name in "
                f"the output path (use_parameter_name_in_output is false). Declare the parameter with "
                f"hashed=True or hidden=True, or put parameter names into paths."
            )
        parts.append(f"{name}{separator}{value}" if with_names else value)
    return parts


def path_value(param: Any, value: Any, as_b2luigi: bool = False) -> str:
    """The text that stands for ``value`` of the parameter ``param`` in paths: its serialized form, or for a
    parameter with ``hashed=True`` a hash of it (``hash_function`` of the value when the parameter has one).
    ``as_b2luigi`` (the setting ``b2luigi_hashing``): b2luigi 1.3's text, the parameter's ``serialize_hashed``
    when it was declared with ``hashed=True`` (``hashed_`` and the md5 of ``str(value)``, or its
    ``hash_function``), else the serialized value."""
    if as_b2luigi:
        hashed = getattr(param, "hashed_given", getattr(param, "hashed", False))
        return str(param.serialize_hashed(value)) if hashed and hasattr(param, "serialize_hashed") \
            else param.serialize(value)
    hash_function = getattr(param, "hash_function", None)
    if hash_function is not None:
        return str(hash_function(value))
    serialized = param.serialize(value)
    return _md5(serialized) if getattr(param, "hashed", False) else serialized


def _md5(text: str) -> str:
    return "hashed_" + hashlib.md5(text.encode()).hexdigest()


def task_folder(task: Any, setting: str) -> Path:
    """``<setting's folder>/<parameter parts>`` for the task (values unusable as folder names hashed)."""
    return base_folder.resolve(get_setting(setting, task=task)).joinpath(*parameter_parts(task, strict=False))


def output_path(task: Any, file_name: str, result_dir: str | None = None) -> str:
    """The path of the output ``file_name`` of ``task`` (a URL under a remote result_dir). The folders are
    joined as text, as b2luigi joins them: a result_dir ``.`` gives ``<script folder>/./<parameters>/...``."""
    folder = result_dir if result_dir is not None else get_setting("result_dir", task=task)
    if isinstance(folder, str) and "://" in folder:
        from b2batch.remote import urls

        if urls.is_remote(folder):
            return urls.join(folder, *parameter_parts(task), file_name)
    folder = os.path.expanduser(os.fspath(folder))
    return os.path.join(folder if os.path.isabs(folder) else os.path.join(base_folder.base_dir(), folder),
                        *parameter_parts(task), file_name)


def log_folder(task: Any) -> Path:
    """Folder of the task's job logs: the one its own ``get_log_file_dir()`` method returns (b2luigi's way
    to choose it; relative to the working directory, as there), else ``<log_dir>/<parameter parts>/<TaskFamily>``."""
    own = getattr(task, "get_log_file_dir", None)
    if callable(own):
        return Path(os.path.abspath(os.fspath(own())))
    return task_folder(task, "log_dir") / task.task_family


def job_folder(task: Any) -> Path:
    """Folder of the task's job files under ``task_file_dir``, by the setting ``job_folder_layout``:
    ``<TaskFamily>/<task_id>`` (b2batch), or ``<parameter parts, hidden ones too>/<TaskFamily>`` (b2luigi, whose
    task files are there)."""
    root = base_folder.resolve(get_setting("task_file_dir", task=task))
    if get_setting("job_folder_layout", task=task) == "b2luigi":
        return root.joinpath(*parameter_parts(task, strict=False, hidden=True), task.task_family)
    return root / task.task_family / task.task_id


#: The escape codes b2luigi prints around a failed job's note (colorama's red and reset).
RED, RESET = "\x1b[31m", "\x1b[0m"


def print_b2luigi_failure(task: Any) -> None:
    """What b2luigi prints on stdout when a task's job failed: the task, its id and parameters, and its log
    folder, between the escape codes of red and of the default colour (b2luigi prints them to any stdout)."""
    lines = [f"Failed task {task} with task_id and parameters:", f"\ttask_id={task.task_id}"]
    lines += [f"\t{name}={getattr(task, name)}" for name, _param in task.get_params()]
    lines += ["Please have a look into the log files in:", os.path.abspath(log_folder(task))]
    print(f"{RED}\n" + "\n".join(lines) + f"\n{RESET}", flush=True)
