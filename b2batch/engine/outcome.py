"""How a job ended, decided in one place: :class:`JobOutcome`.

The engine reads a job's files once when the run hands the job back (:meth:`Run.poll`): the exit code the
wrapper wrote, the reason a set-up failed or the job was cancelled on purpose, the work's JSON result. It puts
them, with what the batch system said (:class:`~b2batch.engine.jobstate.JobState`), into one frozen
:class:`JobOutcome` on ``job.outcome``. Every front-end (luigi tasks, calls/joblib/``Pool``, the farm) judges
a job from that object and reads no exit-code file itself; a front-end that asks about a job of an earlier
steering process (is its last job over, and how did it end?) uses :func:`last_outcome`.

To extend it (accounting figures, a finer ``cause``), add an optional field with a default: every outcome is
made by :meth:`JobOutcome.read`, so one place fills it, and front-ends that do not know the field are
unchanged. ``cause`` and ``node`` come from the batch system's last answer (:mod:`b2batch.engine.causes`).
"""

from __future__ import annotations

import signal as signals
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from b2batch.engine.files import FILE_NAMES, JobFiles
from b2batch.engine.jobstate import JobState, JobStatus

#: Exit code of the wrapper when the job's own set-up (env_script, working_dir) failed.
SETUP_FAILED = 3
#: Exit code of a shell that could not find the command.
COMMAND_NOT_FOUND = 127


@dataclass(frozen=True)
class JobOutcome:
    """How one job ended. ``status``, ``reason`` and ``scheduler_side`` are the batch system's last word (as in
    :class:`~b2batch.engine.jobstate.JobState`); the rest was read from the job's files once, by the engine."""

    status: JobStatus
    #: The batch system's reason (e.g. a hold reason, TIMEOUT), or why the job could not be submitted.
    reason: str = ""
    #: Why the batch system rather than the work ended the job (node failure, preemption, a lost job).
    scheduler_side: str = ""
    #: The exit code the job's wrapper wrote; None when it wrote none (killed, lost, never started).
    exit_code: int | None = None
    #: The signal that ended the work (``SIGKILL``), from an exit code 128+N; empty otherwise.
    signal: str = ""
    #: Why the job ended when the batch system says more than an exit code: one of
    #: :data:`b2batch.engine.causes.CAUSES` (``memory``, ``time``, ``node``), or "" (the work's own end).
    cause: str = ""
    #: The node the job ran on ("" if unknown).
    node: str = ""
    #: Why the job's own set-up (env_script, working_dir) failed; empty if it did not.
    setup_failure: str = ""
    #: Why the job was cancelled on purpose (its run interrupted, ``b2batch cancel``); empty if it was not.
    cancelled: str = ""
    #: The work's JSON result (``result.json``) when it wrote one, e.g. a luigi task's status.
    result: dict[str, Any] | None = None
    #: The job's files (the job's own object: an outcome keeps no paths of its own).
    files: JobFiles | None = field(default=None, repr=False, compare=False)

    @property
    def stdout(self) -> Path | None:
        return self.files.stdout if self.files is not None else None

    @property
    def stderr(self) -> Path | None:
        return self.files.stderr if self.files is not None else None

    @property
    def result_bytes(self) -> Path | None:
        """The file of a result that is not JSON (e.g. a pickled value of a Python call), for the front-end to
        load when ``exit_code`` is not None (a job cut short may have left a partial one)."""
        return self.files.result_bytes if self.files is not None else None

    @classmethod
    def read(cls, files: JobFiles, state: JobState | None = None) -> JobOutcome:
        """The outcome of the job whose files are ``files`` and whose batch job ended in ``state`` (None: judged
        from its exit code alone: successful with 0, aborted otherwise)."""
        code = written_exit_code(files)
        if state is None:
            state = JobState(JobStatus.successful if code == 0 else JobStatus.aborted)
        return cls(status=state.status, reason=state.reason, scheduler_side=state.scheduler_side, cause=state.cause,
                   node=state.node, exit_code=code,
                   signal=_signal_name(code), setup_failure=files.read_setup_failure() if code != 0 else "",
                   cancelled=files.read_cancel() if code != 0 else "", result=files.read_result(),
                   files=files)

    @property
    def final(self) -> bool:
        return self.status.final

    @property
    def succeeded(self) -> bool:
        """Whether the work ended with exit code 0 and the batch system calls the job successful."""
        return self.exit_code == 0 and self.status == JobStatus.successful

    def with_state(self, state: JobState) -> JobOutcome:
        """The same files' outcome under another word of the batch system."""
        return replace(self, status=state.status, reason=state.reason, scheduler_side=state.scheduler_side,
                       cause=state.cause, node=state.node)

    def describe(self) -> str:
        """How the work ended, for messages: ``exited with code 137 (killed by SIGKILL)`` (the cause is the
        batch system's word, which messages give beside it)."""
        if self.exit_code is None:
            return "ended without an exit code (killed, or lost by the batch system)"
        what = f"exited with code {self.exit_code}"
        if self.signal:
            what += f" (killed by {self.signal})"
        return what


def last_outcome(files: JobFiles) -> JobOutcome | None:
    """How the last job in a job folder ended (e.g. one of an earlier steering process); None when it has not
    written its exit code (it may still run, or was lost)."""
    if written_exit_code(files) is None:
        return None
    return JobOutcome.read(files)


def written_exit_code(files: JobFiles) -> int | None:
    """The exit code the job's wrapper wrote, None while there is none: the one reading of the exit-code file
    (the run's outcome, a batch system's judgement of a job that left its queue, an earlier run's job)."""
    return files.read_exit_code()


def status_of_files(files: JobFiles) -> JobStatus | None:
    """How the job ended by its own files alone: successful (exit code 0), aborted (another), or None (no exit
    code yet: the batch system's answer decides)."""
    code = written_exit_code(files)
    return None if code is None else JobStatus.successful if code == 0 else JobStatus.aborted


def has_ended(folder: str | Path) -> bool:
    """Whether the job of the job folder ``folder`` wrote its exit code (without reading it)."""
    return (Path(folder) / FILE_NAMES["exit_code"]).exists()


def ended_at(files: JobFiles) -> float | None:
    """When the job's wrapper wrote its exit code (epoch seconds), or None."""
    try:
        return files.exit_code.stat().st_mtime
    except OSError:
        return None


def _signal_name(code: int | None) -> str:
    if code is None or not 128 < code < 160:
        return ""
    try:
        return signals.Signals(code - 128).name
    except ValueError:
        return ""
