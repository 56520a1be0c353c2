"""Checkpoints of luigi tasks: a task that defines ``checkpoint()`` is warned before its job's walltime or
preemption, saves its state, and its job is requeued to resume.

- Where the task keeps its state: ``self.checkpoint_path`` (a file in the task's job folder,
  ``<task_file_dir>/<TaskFamily>/<task_id>/checkpoint``, on the shared file system). ``run()`` resumes from it
  when it exists; b2batch removes it when the task succeeded.
- The warning: b2batch asks the task's batch system for one (:func:`with_warning`): Slurm
  ``--signal=B:USR1@<checkpoint_warning>``, SGE ``-notify``, HTCondor ``kill_sig = SIGUSR1`` with
  ``want_graceful_removal``, LSF ``-wa USR1 -wt <minutes>``; options the task sets itself win. The job's
  wrapper passes SIGUSR1 and SIGUSR2 on to the task's process (for other tasks they stop it, as before).
- In the task's process (:func:`install`) the first warning calls ``checkpoint()`` and unwinds ``run()``; the
  job then exits with :data:`~b2batch.engine.preemption.REQUEUE_EXIT` and the run submits it again (no failure),
  up to ``max_checkpoint_requeues`` times.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from b2batch.engine import preemption
from b2batch.luigi_frontend import layout
from b2batch.luigi_frontend.job_on_node import node_job

logger = logging.getLogger(__name__)

#: The settings that carry each batch system's submit options, which get the warning.
WARNING_SETTINGS = ("slurm_settings", "sge_settings", "htcondor_settings", "lsf_settings")


def can_checkpoint(task: Any) -> bool:
    """Whether the task defines ``checkpoint()``."""
    return callable(getattr(task, "checkpoint", None))


def checkpoint_path(task: Any) -> Path:
    """The file in which ``task`` keeps its checkpoint: ``checkpoint`` in its job folder (in its job: the folder
    of the job it runs in, as the steering process made it)."""
    job = node_job(task)
    return (job.folder if job is not None else layout.job_folder(task)) / "checkpoint"


def remove_checkpoint(task: Any) -> None:
    """The task succeeded: its checkpoint is of no more use (a later run after --remove starts afresh)."""
    if can_checkpoint(task):
        try:
            checkpoint_path(task).unlink(missing_ok=True)
        except OSError as e:  # a folder that is gone: nothing to remove
            logger.debug("Could not remove the checkpoint of %s: %s", task, e)


def with_warning(task: Any, name: str, value: Any, seconds: int) -> Any:
    """The submit options of setting ``name`` (one of :data:`WARNING_SETTINGS`) of a task that can
    checkpoint, with the batch system's warning ``seconds`` before the end (the task's checkpoint_warning, which
    its resolver read) added unless the task sets it itself; ``value`` unchanged for other tasks and settings (or
    a value that is no dict: the batch system's check names it)."""
    if name not in WARNING_SETTINGS or not isinstance(value or {}, dict) or not can_checkpoint(task):
        return value
    added: dict[str, Any] = {
        "slurm_settings": {"signal": f"B:USR1@{seconds}"},
        "sge_settings": {"notify": True},
        "htcondor_settings": {"kill_sig": "SIGUSR1", "want_graceful_removal": "true"},
        "lsf_settings": {"wa": "USR1", "wt": str(max(1, math.ceil(seconds / 60)))},
    }[name]
    return {**added, **(value or {})}


def install(task: Any, job_folder: Path) -> None:
    """In the job's process, before ``task`` runs: the batch system's first warning calls its ``checkpoint()``
    and unwinds it (:class:`~b2batch.engine.preemption.Checkpointed`); a warning before ``run()`` began (Slurm
    may send it a minute early) unwinds it without calling ``checkpoint()``, which may need what ``run()`` sets up,
    and had nothing new to save. Other tasks keep the wrapper's rule (the warning stops them as SIGTERM does)."""
    if not can_checkpoint(task):
        return
    began = _note_when_run_begins(task)

    def save(signal_name: str) -> bool:
        if not began():
            logger.warning("Task %s: warned (%s) before it began: nothing to save", task, signal_name)
            return False
        logger.warning("Task %s: saving its checkpoint (%s) before the batch system ends the job", task,
                       signal_name)
        task.checkpoint()
        return True

    preemption.install(save)


def _note_when_run_begins(task: Any) -> Callable[[], bool]:
    """Make ``task.run`` (this instance's) note when it is called; whether it was, as a function. A warning that
    came before is taken there: luigi's event callbacks (``START``) end quietly on the unwinding it raised."""
    run, began = task.run, []

    @functools.wraps(run)
    def noted(*args: Any, **kwargs: Any) -> Any:
        if preemption.received():
            raise preemption.Checkpointed(preemption.received(), saved=False)
        began.append(True)
        return run(*args, **kwargs)

    task.run = noted
    return lambda: bool(began)


def stand_down(task: Any) -> None:
    """``task`` ran to its end: a warning now comes too late to save anything, and must not undo the outcome."""
    if can_checkpoint(task):
        preemption.stand_down()


def requeue(task: Any, job_folder: Path, stop: preemption.Checkpointed) -> int:
    """The task saved its checkpoint (or was warned before it began) and unwound: mark its job for requeueing;
    the job's exit code."""
    if not stop.saved:
        logger.warning("Task %s: its job asks to be submitted again, to begin", task)
        return preemption.ask_for_requeue(job_folder, f"{stop.signal_name} before the task began")
    logger.warning("Task %s: checkpoint saved on %s; its job asks to be submitted again to resume", task,
                   stop.signal_name)
    return preemption.ask_for_requeue(job_folder, f"{stop.signal_name} before the batch system's limit")
