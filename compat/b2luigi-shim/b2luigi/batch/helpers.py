"""What b2luigi's batch processes (``b2luigi.batch.processes.*``) share: the task's executable wrapper where
b2luigi puts it, the checks that keep a setting from adding lines to a submit file, and the retries of a
status query.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

#: A submit file option's name: letters, digits, ``_``, ``-``, ``.`` (HTCondor's ``+Attr`` also).
_OPTION = re.compile(r"\+?[A-Za-z0-9_][A-Za-z0-9_.\-]*\Z")


def wrapper_for(task: Any) -> str:
    """Write the task's executable wrapper (b2batch's, in its job folder) and return its path; a task whose
    ``get_task_file_dir`` names another folder (as b2luigi lets it) gets a copy there, whose path is returned."""
    from b2luigi.core.utils import get_task_file_dir

    written = _write_wrapper(task)
    folder = get_task_file_dir(task)
    wanted = os.path.join(folder, os.path.basename(written))
    if os.path.abspath(wanted) != os.path.abspath(written):
        os.makedirs(folder, exist_ok=True)
        shutil.copy2(written, wanted)
        return wanted
    return written


def _write_wrapper(task: Any) -> str:
    """Write the task's job files as ``core.executable.create_executable_wrapper`` does, the wrapper also for a
    task b2batch would run in a bundle of its group (b2luigi's processes submit each task as a job of its own)."""
    from b2batch.luigi_frontend.task_job_files import write_task_job_files

    return str(write_task_job_files(task).wrapper)


def one_line(value: Any, what: str) -> str:
    """``str(value)``; a ``ValueError`` when it holds a line break, which would start a new line (a shell command
    or a submit command) in the file it is written to."""
    text = str(value)
    if "\n" in text or "\r" in text:
        raise ValueError(f"{what} contains a line break, which cannot be written into a submit file: {text!r}")
    return text


def option_name(key: Any, setting: str) -> str:
    """``key`` of the dict setting ``setting`` as an option name; a ``ValueError`` for anything else."""
    name = str(key)
    if not _OPTION.match(name):
        raise ValueError(f"{name!r} in {setting} is not an option name (letters, digits, '_', '-', '.')")
    return name


def retried(function: F) -> F:
    """Call ``function`` again when it raises ``CalledProcessError``, after 2, 6 and 18 seconds (four tries in
    all, as b2luigi's status queries do); the last error is raised."""
    waits = (2, 6, 18)

    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> Any:
        for wait in waits:
            try:
                return function(*args, **kwargs)
            except subprocess.CalledProcessError:
                time.sleep(wait)
        return function(*args, **kwargs)

    return call  # type: ignore[return-value]
