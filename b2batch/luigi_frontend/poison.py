"""Poison tasks: a task's failures are counted across runs of its workflow, in its job folder, and a task that
failed ``max_task_failures`` times is not submitted again until the user asks (``--retry-failed``, or
``b2batch retry``).

The count lives in ``failures.json`` in the task's job folder (``<task_file_dir>/<TaskFamily>/<task_id>/`` by
default) beside the task's other job files:
``{"count": 3, "last_error": "...", "log": "<stderr path>", "at": <epoch seconds>}``. It is written atomically
(a reader sees the old file or the new one), counts failures of the task's own jobs (not jobs the batch system
lost, nor cancelled ones, nor tasks that were not submitted), and is removed when the task succeeds.
"""

from __future__ import annotations

import fnmatch
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from b2batch.engine.files import FILE_NAMES, atomic_write, job_folders

#: The file that holds a task's failure count, in its job folder.
FILE_NAME = "failures.json"


@dataclass(frozen=True)
class Failures:
    """How often a task's jobs failed in a row (across runs), and the last failure."""

    count: int
    last_error: str = ""
    log: str = ""
    at: float = 0.0


def read(folder: Path) -> Failures | None:
    """The failure count kept in the job folder ``folder`` (None: none, or unreadable). Asked once per task of a
    run: a plain path, not a Path object."""
    try:
        with open(os.path.join(folder, FILE_NAME), encoding="utf-8") as f:
            data = json.loads(f.read())
        return Failures(int(data["count"]), str(data.get("last_error", "")), str(data.get("log", "")),
                        float(data.get("at", 0.0)))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def error_line(message: str) -> str:
    """The line of a failed job's message (:meth:`Job.failure_message`) a summary shows: the task's own error
    (the last line of its traceback, e.g. ``ValueError: no input``) when it has one, else the first line."""
    lines = [line.strip() for line in (message or "").split("\nstdout: ")[0].splitlines() if line.strip()]
    if not lines:
        return ""
    if any(line.startswith("Error: ") for line in lines):
        return lines[-1].removeprefix("Error: ")
    return lines[0]


def count_failure(folder: Path, error: str, log: str | Path) -> Failures:
    """Count one more failure of the task whose job folder is ``folder``; the new count."""
    earlier = read(folder)
    failures = Failures((earlier.count if earlier else 0) + 1, error_line(error), str(log), time.time())
    Path(folder).mkdir(parents=True, exist_ok=True)
    atomic_write(Path(folder) / FILE_NAME, json.dumps(asdict(failures)) + "\n")
    return failures


def clear(folder: Path) -> Failures | None:
    """Forget the task's failures (it succeeded, or the user asked to try it again); what was counted."""
    earlier = read(folder)
    (Path(folder) / FILE_NAME).unlink(missing_ok=True)
    return earlier


def forget(folder: Path) -> None:
    """The task succeeded: its failures no longer count (one unlink; nothing is read)."""
    try:
        os.unlink(os.path.join(folder, FILE_NAME))
    except FileNotFoundError:
        pass


def held_back(task: Any, folder: Path, limit: int | None) -> tuple[Failures, str] | None:
    """Whether ``task`` is a poison task (it failed ``limit`` times, counted in ``folder``): its count and the
    message that says so and how to try it again; None when it may be submitted."""
    if limit is None:
        return None
    failures = read(folder)
    if failures is None or failures.count < limit:
        return None
    message = (f"Task {task} was not submitted: it failed {failures.count} time(s) in earlier runs, and "
               f"max_task_failures is {limit}. Last error: {failures.last_error or '(none recorded)'} "
               f"(log: {failures.log}).\nRun the workflow with --retry-failed, or `b2batch retry SCRIPT "
               f"{task.task_family}`, to submit it again.")
    return failures, message


def _identity(folder: Path) -> tuple[str, str]:
    """The task family and task id of the job folder ``folder``: from its spec, else from its place
    (``<TaskFamily>/<task_id>``)."""
    try:
        spec = json.loads((folder / FILE_NAMES["spec"]).read_text())
        return str(spec["task_family"]), str(spec["task_id"])
    except (OSError, ValueError, KeyError, TypeError):
        return folder.parent.name, folder.name


def reset(task_file_dir: Path, patterns: list[str] | None = None) -> list[tuple[str, Failures]]:
    """Forget the failures of every task under ``task_file_dir`` whose family or task id matches one of the
    shell-style ``patterns`` (all tasks without patterns); the task ids and what was counted, sorted."""
    reset_ones = []
    for folder in job_folders(task_file_dir, FILE_NAME):
        path = folder / FILE_NAME
        family, task_id = _identity(folder)
        if patterns and not any(fnmatch.fnmatchcase(family, p) or fnmatch.fnmatchcase(task_id, p)
                                for p in patterns):
            continue
        failures = clear(path.parent)
        if failures is not None:
            reset_ones.append((task_id, failures))
    return reset_ones
