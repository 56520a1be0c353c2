"""The warning before a job's walltime or preemption, on the node, and how a job asks to be requeued.

Batch systems warn a job before they end it: Slurm with ``--signal=B:USR1@<seconds>``, HTCondor with its
``kill_sig`` on vacate or removal, SGE with ``-notify`` (SIGUSR1 before a suspension, SIGUSR2 before a kill,
and SIGUSR1 at ``s_rt``), LSF with ``-wa USR1 -wt <minutes>``. The job's wrapper passes SIGUSR1 and SIGUSR2 on
to the work's process when the work can checkpoint; :func:`install` makes that process save its state (the
front-end's ``on_warning``) and unwind with :class:`Checkpointed`. The process then writes the job folder's
``checkpointed`` marker (:func:`ask_for_requeue`) and exits with :data:`REQUEUE_EXIT`: the run submits the job
again (:func:`requeue_reason`), up to the job's ``max_checkpoint_requeues``, and that is no failure.

The flag :func:`preempted` belongs to the job's process (a node-side process runs one unit of work): work that
keeps its own state can look at it between steps and end itself.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable
from types import FrameType
from typing import Any

from b2batch.engine.files import atomic_write

logger = logging.getLogger(__name__)

#: The exit code of a job that saved a checkpoint and asks to be submitted again (sysexits' EX_TEMPFAIL).
REQUEUE_EXIT = 75
#: The signals batch systems send as their warning (SGE's -notify sends both).
WARNING_SIGNALS = (signal.SIGUSR1, signal.SIGUSR2)


class Checkpointed(KeyboardInterrupt):
    """Raised in the work's process after its checkpoint was saved: it unwinds the work (``finally`` blocks and
    ``on_temporary_files`` clean up). A KeyboardInterrupt, so that luigi's task process passes it on instead of
    counting a failure."""

    def __init__(self, signal_name: str, saved: bool = True) -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name
        #: False when the warning came before the work began: nothing was saved, and nothing needed to be.
        self.saved = saved


class _Warning:
    """The warning this job's process received (one process runs one unit of work)."""

    signal_name: str = ""


def preempted() -> bool:
    """Whether this job received the batch system's warning before its walltime or preemption (SIGUSR1 or
    SIGUSR2 passed on by its wrapper): work should save its state and end soon."""
    return bool(_Warning.signal_name)


def received() -> str:
    """The name of the warning signal this job's process received ("" if none)."""
    return _Warning.signal_name


def install(on_warning: Callable[[str], bool | None] | None) -> None:
    """On the first SIGUSR1 or SIGUSR2: note it (:func:`preempted`), call ``on_warning(signal_name)`` (e.g. the
    task's ``checkpoint()``; it returns False when there was nothing to save yet) and raise
    :class:`Checkpointed`; later warnings are ignored. With ``on_warning=None`` only the flag is set and the work
    goes on."""

    def handler(signum: int, frame: FrameType | None) -> None:
        if _Warning.signal_name:
            return
        _Warning.signal_name = signal.Signals(signum).name
        logger.warning("b2batch: %s received: the batch system ends this job soon", _Warning.signal_name)
        if on_warning is None:
            return
        for other in WARNING_SIGNALS:
            signal.signal(other, signal.SIG_IGN)  # nothing may interrupt the checkpoint
        saved = on_warning(_Warning.signal_name) is not False
        raise Checkpointed(_Warning.signal_name, saved)

    for signum in WARNING_SIGNALS:
        signal.signal(signum, handler)


def stand_down() -> None:
    """The work is done: a warning from now on is ignored (the job ends on its own, with the work's outcome)."""
    for signum in WARNING_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)


def ask_for_requeue(folder: Any, reason: str) -> int:
    """Mark the job in job folder ``folder`` as checkpointed (why: ``reason``); the exit code to end with."""
    from pathlib import Path

    atomic_write(Path(folder) / "checkpointed", reason + "\n")
    return REQUEUE_EXIT


def requeue_reason(exit_code: int | None, marker: str, requeues: int, limit: int | None) -> str:
    """Why to submit a job again that ended with ``exit_code`` and the ``checkpointed`` marker text ``marker``
    after ``requeues`` requeues, within ``limit``; "" when it is no checkpointed job or the limit is reached."""
    if exit_code != REQUEUE_EXIT or not marker or requeues >= (limit or 0):
        return ""
    return f"checkpointed ({marker}); requeued to resume ({requeues + 1} of {limit}, setting max_checkpoint_requeues)"
