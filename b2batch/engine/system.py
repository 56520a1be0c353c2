""":class:`BatchSystem`: what the engine needs of a batch system, one object per system per run.

A batch system submits groups of jobs (arrays where it has them), answers one status query for all its
jobs, and cancels many jobs with one command. Its answers are :class:`JobState` values. Built-in systems live
in :mod:`b2batch.systems`; b2luigi-style ``BatchProcess`` plugins are adapted to this interface by the luigi
front-end.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from b2batch.engine.jobstate import JobState

if TYPE_CHECKING:
    from b2batch.engine.job import Job
    from b2batch.engine.run import Run


class BatchSystem(abc.ABC):
    """One batch system in use by one run."""

    #: Name of the batch system, as used in the ``batch_system`` setting.
    name: ClassVar[str] = ""
    #: The settings that shape this system's jobs (their submit options, wrapper and environment), looked up
    #: with ``job.config[name]``: units that differ in one of them never share a pilot or bundle job, and
    #: units that differ only in other settings (e.g. another system's options) do.
    job_settings: ClassVar[tuple[str, ...]] = ()
    #: Whether its jobs run on this machine: their files are on a local file system, cheap to look at often.
    on_this_host: ClassVar[bool] = False

    def __init__(self, run: Run) -> None:
        self.run = run

    def watched(self) -> bool:
        """Whether :meth:`news` can be True: a run waiting between polls then asks it every few milliseconds."""
        return False

    def news(self) -> bool:
        """Whether the next poll may have something new to hand back (a unit that ended), looked at cheaply: a run
        that waits between two polls asks every few milliseconds and polls at once when it is True. Default:
        False (the run waits its whole poll pause)."""
        return False

    def groups(self, jobs: list[Job]) -> list[list[Job]]:
        """How waiting jobs go to the batch system: one group per submission (default: one job each)."""
        return [[job] for job in jobs]

    def takes_now(self, waiting: Sequence[Job]) -> list[Job]:
        """The jobs of ``waiting`` (those that wait to be submitted) that gain nothing by waiting for more (the
        submission window gathers jobs into arrays): e.g. units that go to pilots, which take units from a queue
        one by one. Default: none; they all wait."""
        return []

    @abc.abstractmethod
    def submit(self, group: list[Job]) -> None:
        """Submit a group of :meth:`groups`, setting each job's ``job_id``. A
        :class:`~b2batch.errors.TransientCommandError` means "try again later"; another
        :class:`~b2batch.errors.B2BatchError` fails the group's jobs with its message."""

    @abc.abstractmethod
    def states(self, jobs: Iterable[Job]) -> dict[Job, JobState]:
        """The states of ``jobs`` (all submitted, none over; a live view, not a copy) with at most one
        status query for all of them. Jobs whose state did not change since the last call may be left out;
        a system that knows which changed should not go over all of ``jobs``."""

    @abc.abstractmethod
    def cancel(self, jobs: list[Job]) -> None:
        """Stop these jobs, with as few commands as the batch system allows (a job that ended is no error)."""

    def attach(self, job: Job, journal: dict[str, Any]) -> bool:
        """Take over the job of an earlier steering process recorded in ``journal`` if the batch system still
        has it queued or running (set ``job.job_id``); whether it did."""
        return False

    def adopt(self, job: Job, intent: dict[str, Any]) -> bool:
        """Take over the job a steering process began to submit but was killed before it recorded the answer
        (``intent``: what :meth:`~b2batch.engine.files.JobFiles.record_intent` wrote), if the batch system has a
        job with its tag queued or running (set ``job.job_id``); whether it did. All of a run's adoptions cost
        one status query per batch system."""
        return False

    def ended_unpolled(self, job: Job) -> None:
        """``job`` ended after the run's last poll (a pilot that ended by itself as the run closed): a system
        that collects accounting asks for its figures when it closes. Default: nothing."""

    def capacity(self) -> int | None:
        """How many jobs the batch system runs at once for this run, if it knows (e.g. the local slots); None
        for a cluster, whose share for the user is not known."""
        return None

    def needs_job_script(self, job: Job) -> bool:
        """Whether ``job`` runs as a batch job of its own, whose spec and wrapper script its front-end writes;
        False where this batch system runs the job's ``unit`` in worker jobs it makes itself (pilots, bundles)."""
        return True

    def avoid_nodes(self, nodes: tuple[str, ...]) -> None:
        """The run excluded ``nodes`` (bad nodes: docs/policies.md); later submissions avoid them. A system that
        can change its queued jobs moves those off them too (default: it cannot)."""

    def forget(self, job: Job) -> None:
        """The run no longer follows ``job`` (it ended, or was cancelled)."""

    def warm(self, template: Job) -> None:
        """Start the workers that units like ``template`` would get (local pilots) before the units come, as
        ``multiprocessing.Pool`` starts its processes when it is made: only where a worker costs no allocation
        (jobs on this host). Default: nothing (the units' workers start when the units come)."""

    def wake(self, jobs: list[Job]) -> None:
        """Worker jobs of the run (pilots) may have new units, or are told to stop: a system whose jobs run on
        this host wakes them from their idle pause (default: they see it after their pause)."""

    def wake_to_end(self, jobs: list[Job]) -> None:
        """The run's worker jobs (pilots) were told to end, the run closing: end their idle pause where the system
        can signal its jobs, wherever they run (default: :meth:`wake`)."""
        self.wake(jobs)

    def close(self) -> None:
        """The run ends: let go of anything kept for more work (e.g. worker jobs)."""
