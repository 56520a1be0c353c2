"""What a batch system says of a job: its status, and why it is in it, as a value.

A status query returns :class:`JobState` values; nothing is kept in attributes to be read back later.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class JobStatus(enum.Enum):
    """A job's state, as far as b2batch cares (b2luigi's four)."""

    idle = "idle"
    running = "running"
    successful = "successful"
    aborted = "aborted"

    @property
    def final(self) -> bool:
        return self in (JobStatus.successful, JobStatus.aborted)


@dataclass(frozen=True)
class NativeState:
    """A job's state in the scheduler's own words, and why it is in it (if the scheduler says)."""

    state: str
    reason: str = ""
    exit_code: int | None = None
    #: The node (host) the job ran on, if the scheduler says.
    node: str = ""
    #: Why it ended, when the scheduler's answer says (:mod:`b2batch.engine.causes`); "" otherwise.
    cause: str = ""


@dataclass(frozen=True)
class JobState:
    """A job's status with the batch system's reason (e.g. a hold reason or TIMEOUT) and, when the batch
    system rather than the work ended the job (node failure, preemption, a lost job), why: such jobs are
    submitted again, up to ``max_resubmissions`` times."""

    status: JobStatus
    reason: str = ""
    scheduler_side: str = ""
    #: Why the job ended, when the batch system's answer says more than an exit code: one of
    #: :data:`b2batch.engine.causes.CAUSES` (``memory``, ``time``, ``node``), or "" (the task's own end).
    cause: str = ""
    #: The node the job ran on ("" if unknown).
    node: str = ""

    @property
    def final(self) -> bool:
        return self.status.final


IDLE = JobState(JobStatus.idle)
RUNNING = JobState(JobStatus.running)
