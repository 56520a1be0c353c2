"""A luigi task's job files, and what the last job recorded there says of the task's outputs.

A task's outputs count only when its last job of a ``--batch`` run ended successfully: a job that failed, was
killed or has not ended may have left partial outputs. :class:`~b2batch.luigi_frontend.jobs.TaskJobs` applies
this rule in a batch run; ``--dry-run``, ``show`` and a run without ``--batch`` use the functions here.
"""

from __future__ import annotations

import logging
from typing import Any

import luigi.task

from b2batch.engine import JobFiles, JobOutcome, last_outcome
from b2batch.errors import B2BatchError
from b2batch.luigi_frontend.layout import job_folder, log_folder

logger = logging.getLogger(__name__)


def task_files(task: Any) -> JobFiles:
    """The job files of ``task``: in its job folder (:func:`~b2batch.luigi_frontend.layout.job_folder`, by default
    ``<task_file_dir>/<TaskFamily>/<task_id>/``), logs in ``<log_dir>/<parameters>/<TaskFamily>/``."""
    return JobFiles(folder=job_folder(task), log_folder=log_folder(task))


def last_job(files: JobFiles) -> tuple[str, JobOutcome | None] | None:
    """The last job recorded in a task's job folder ("slurm job 42") and how it ended (the engine's
    :func:`~b2batch.engine.last_outcome`; None: it has not ended, or was lost); None without a journal."""
    journal = files.read_submission()
    if journal is None:
        return None
    return f"{journal.get('system')} job {journal.get('job_id')}", last_outcome(files)


def remove_outputs(task: Any) -> list[str]:
    """Remove the outputs of ``task`` that exist; their paths."""
    removed = []
    for target in luigi.task.flatten(task.output()):
        if target.exists():
            target.remove()
            removed.append(str(getattr(target, "path", target)))
    return removed


def outputs_counted(task: Any) -> bool:
    """Whether the outputs of a task count as a run counts them (``--dry-run``, ``show``): not when its last job
    of a ``--batch`` run did not end successfully or has not ended (they may be partial; a run removes them)."""
    try:
        last = last_job(task_files(task))
    except B2BatchError:
        return True  # a setting that makes no job folder: no job of b2batch made the outputs
    return last is None or (last[1] is not None and last[1].exit_code == 0)


def discard_partial_outputs(task: Any) -> None:
    """Before a run without ``--batch``: the outputs of a task whose last job (of an earlier ``--batch`` run)
    did not end successfully, or has not ended, may be partial; they are removed with a log line, so that
    luigi's worker runs the task again instead of taking them as complete. (A batch run follows a job that
    has not ended instead: ``--batch`` is the way to wait for it.)"""
    try:
        last = last_job(task_files(task))
    except B2BatchError:
        return  # a setting that makes no job folder: no job of b2batch made the outputs
    if last is None or (last[1] is not None and last[1].exit_code == 0):
        return
    earlier, ended = last
    exit_code = ended.exit_code if ended is not None else None
    removed = remove_outputs(task)
    if not removed:
        return
    why = (f"ended with exit code {exit_code}" if exit_code is not None else
           "has not ended (or was lost; run with --batch to follow it instead)")
    logger.warning("Task %s: its last job (%s) %s; its outputs may be partial and do not count: removed %s", task,
                   earlier, why, ", ".join(removed))


def missing_outputs(task: Any) -> list[str]:
    """The declared outputs of ``task`` that do not exist."""
    return [str(getattr(t, "path", t)) for t in luigi.task.flatten(task.output()) if not t.exists()]
