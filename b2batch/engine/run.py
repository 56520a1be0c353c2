""":class:`Run`: one run of jobs. It owns the batch systems in use, their submitters and monitors, the live
jobs, the run's record and its interruption; two runs in one process do not see each other's jobs.

A front-end makes :class:`~b2batch.engine.job.Job` objects and loops::

    run = Run(config=run_config())                # b2batch.settings.runconfig: the run-level settings, fixed
    run.add_system("slurm", SlurmSystem)          # once per batch system (or a factory)
    run.submit(job)                                # queued; goes out in bulk at the next poll
    for job in run.poll():                         # jobs whose batch job ended
        ...                                        # job.outcome says how; run.settle(job, ok, reason)
    run.wait()                                     # a short sleep between polls

The run submits in bulk within the throttle, follows jobs with one status query per batch system per poll,
submits again jobs that the batch system lost (``max_resubmissions``), takes over jobs of an earlier steering
process that still run (the journal ``submission.json``), and cancels everything with one command per batch
system when interrupted (:meth:`interrupt`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator

from b2batch.engine import preemption
from b2batch.engine.config import RunConfig
from b2batch.engine.files import JobFiles
from b2batch.engine.healing import Healing
from b2batch.engine.job import Job
from b2batch.engine.outcome import JobOutcome, written_exit_code
from b2batch.engine.record import RunRecord
from b2batch.engine.jobstate import JobState, JobStatus
from b2batch.engine.submission import Submitter
from b2batch.engine.system import BatchSystem

logger = logging.getLogger(__name__)


def _ended_badly(files: JobFiles) -> bool:
    """Whether the job in ``files`` wrote an exit code other than 0 (read only where an earlier job is known)."""
    return written_exit_code(files) not in (None, 0)


#: How often a run waiting between two polls asks its batch systems for news (:meth:`Run.wait`), in seconds.
NEWS_STEP = 0.02
#: The first step of a wait of a run with at most :data:`FEW_JOBS` jobs in flight (then doubled up to NEWS_STEP).
FIRST_NEWS_STEP = 0.002
FEW_JOBS = 64


class Run:
    """The jobs of one run, and the batch systems they go to."""

    def __init__(self, record: RunRecord | None = None, poll_pause: float = 0.2,
                 max_in_flight: int | None = None, config: RunConfig | None = None) -> None:
        self.record = record or RunRecord()
        #: The run-level configuration, fixed for the run (``max_in_flight`` given here overrides its
        #: max_jobs_in_flight); the engine and the batch systems read no settings store.
        self.config = config or RunConfig()
        if max_in_flight is not None:
            self.config = self.config.replace(max_jobs_in_flight=max_in_flight)
        #: Most jobs of one batch system in flight at once given by the front-end (None: the job's setting
        #: max_jobs_in_flight where a batch system asks for it, else the configuration's).
        self.max_in_flight = max_in_flight
        #: The front-end's say on a job that ended unsuccessfully for no scheduler-side reason: why to submit
        #: it again (within ``max_resubmissions``), or "" (e.g. a call front-end retries killed jobs, not
        #: calls that raised).
        self.retry_reason: Callable[[Job, JobOutcome], str] | None = None
        #: Tags this run's jobs (part of job names and HTCondor's JobBatchName).
        self.tag = os.urandom(4).hex()
        self.systems: dict[str, BatchSystem] = {}
        self.submitters: dict[str, Submitter] = {}
        #: Jobs submitted or waiting to be, not yet ended, by id().
        self.live: dict[int, Job] = {}
        self.interrupted = False
        self.poll_pause = poll_pause
        self._ended: list[Job] = []
        #: Jobs that failed on a node that may be bad, held until the run knows (healing.suspected), by id().
        self._parked: dict[int, tuple[Job, JobOutcome]] = {}
        self._counter = 0
        self._held = 0
        self._answers: dict[BatchSystem, dict[Job, JobState]] = {}  # states not yet taken by their follower
        #: Memory and time escalation, bad nodes (docs/policies.md); what they did goes into the record.
        self.healing = Healing(self.config, self.record)
        self.healing.on_excluded = self._avoid_nodes

    # --- batch systems -------------------------------------------------------------------------------

    def add_system(self, name: str, create: Callable[[Run], BatchSystem]) -> BatchSystem:
        """The run's batch system ``name``, made by ``create(run)`` the first time."""
        system = self.systems.get(name)
        if system is None:
            system = create(self)
            self.systems[name] = system
            self.submitters[name] = Submitter(system, self._submitted, self._submission_failed, self.config)
        return system

    def writes_job_scripts(self, job: Job) -> bool:
        """Whether ``job``'s batch system writes its spec and wrapper itself when the job gets a batch job of its
        own (a shaped run, for a front-end that writes none for units that may go to pilots)."""
        return bool(getattr(self.systems[job.system], "writes_job_scripts", False))

    def needs_job_script(self, job: Job) -> bool:
        """Whether ``job``'s front-end writes its spec and wrapper script (its batch system, added to this run,
        runs it as a job of its own), or its batch system runs its ``unit`` in worker jobs."""
        return self.systems[job.system].needs_job_script(job)

    def _avoid_nodes(self, name: str, nodes: tuple[str, ...]) -> None:
        """Nodes of batch system ``name`` were excluded: its jobs already queued move off them where it can
        (also behind a front of the run's own: job shapes, pilots)."""
        system: BatchSystem | None = self.systems.get(name)
        seen: set[int] = set()
        while system is not None and id(system) not in seen:
            seen.add(id(system))
            try:
                system.avoid_nodes(nodes)
            except Exception:  # the exclusion still holds for later submissions
                logger.exception("Could not move queued %s jobs off %s", name, ", ".join(nodes))
            system = getattr(system, "inner", None)

    def next_number(self) -> int:
        """A number unique in this run (e.g. for array folders)."""
        self._counter += 1
        return self._counter

    # --- jobs ----------------------------------------------------------------------------------------

    def warm(self, template: Job) -> None:
        """Let the batch system of ``template`` start the workers its units would get before they come
        (:meth:`BatchSystem.warm`: local pilots; elsewhere nothing)."""
        self.systems[template.system].warm(template)

    def submit(self, job: Job) -> None:
        """Follow the job of an earlier steering process for the same work if it still runs; else queue
        ``job`` for submission."""
        system = self.systems[job.system]
        self.live[id(job)] = job
        self.record.update(job, "waiting")
        if self._follows_earlier(job, system):
            logger.info("Job %s: task %s is still queued or running from an earlier run; following it", job.job_id,
                        job)
            job.earlier = True
            self.submitters[job.system].add_in_flight(job)
            self.record.update(job, "submitted")
            return
        self._queue(job)

    def _follows_earlier(self, job: Job, system: BatchSystem) -> bool:
        """Whether ``system`` still has a job of an earlier steering process for ``job`` and now follows it: the
        one its journal names, or, when that process was killed while it submitted (an intent newer than the
        journal), the one that carries the intent's tag (adopted, and its journal written now).

        A job that ended well since its front-end looked (exit code 0 written in between: the front-end's check
        and this call are not one step, and a graph's checks run long before its submissions) is followed too,
        and the next poll reports its end; submitting it again would run its work twice. Only a job that ended
        badly goes again, and one whose front-end saw it ended (``job.earlier_ended``: e.g. its outputs were
        removed since)."""
        if job.earlier_ended or not job.journaled:
            return False
        files = job.files
        intent = files.read_intent()
        if intent is not None:
            if intent.get("system") != system.name or _ended_badly(files):
                return False
            if not system.adopt(job, intent):
                return False
            files.record_submission(system.name, str(job.job_id), job.placement)
            return True
        journal = files.read_submission()
        return bool(journal and journal.get("system") == system.name and not _ended_badly(files)
                    and system.attach(job, journal))

    def _queue(self, job: Job) -> None:
        job.earlier = False
        job.journal_written = False
        job.files.reset(make=job.inline is None)
        job.job_id = None
        submitter = self.submitters[job.system]
        submitter.enqueue(job)
        if not self.interrupted and not self._held:
            submitter.flush_if_due()

    @contextlib.contextmanager
    def holding(self) -> Iterator[None]:
        """Jobs submitted inside go out together (e.g. the members of a bundle, which a submission in between
        would split into two batch jobs): none is submitted before the block ends."""
        self._held += 1
        try:
            yield
        finally:
            self._held -= 1
        if not self._held and not self.interrupted:  # not after an error: the run may be stopping
            for submitter in self.submitters.values():
                submitter.flush_if_due()

    def requeue(self, job: Job) -> None:
        """A job its batch system gave back before it started (e.g. a unit taken out of a pilot queue) waits to
        be submitted again: it goes out at the next poll, where the batch system may place it otherwise."""
        if id(job) not in self.live:
            return
        self.submitters[job.system].done(job)
        job.earlier = False
        job.journal_written = False
        job.files.reset(make=job.inline is None)
        job.job_id = None
        self.record.update(job, "waiting")
        self.submitters[job.system].enqueue(job)

    def _submitted(self, job: Job) -> None:
        if not job.journal_written:  # a pilot's or bundle's unit has one from before it was queued
            job.files.record_submission(job.system, str(job.job_id), job.placement)
        job.journal_written = False
        self.record.update(job, "submitted")
        if job.job_id:
            logger.info("Job %s: submitted task %s to %s", job.job_id, job, job.system)
        else:
            logger.info("Queued task %s for %s", job, job.system)

    def _submission_failed(self, job: Job, message: str) -> None:
        job.not_submitted = True
        self._end(job, JobState(JobStatus.aborted, message))

    def poll(self) -> list[Job]:
        """Submit what is due, ask every batch system about its jobs (each decides whether a query is due),
        submit again the jobs it lost; the jobs that ended since the last call."""
        for name, system in self.systems.items():
            submitter = self.submitters[name]
            if not self.interrupted:
                submitter.flush()
            if not submitter.in_flight:
                continue
            for job, state in self.states(system, submitter.in_flight.values(), self._follows).items():
                self._observe(job, state)
        if self._parked:
            self._review_parked()
        ended, self._ended = self._ended, []
        return ended

    def _follows(self, job: Job) -> bool:
        return id(job) in self.live

    def states(self, system: BatchSystem, jobs: Iterable[Job], mine: Callable[[Job], bool]) -> dict[Job, JobState]:
        """Ask ``system`` about ``jobs``; the states of the jobs ``mine`` accepts. The run's own jobs and the
        worker jobs of pilots and bundles share one batch system object, whose answer may hold every job of it
        that changed: an answer that is not the caller's waits for the follower it belongs to."""
        waiting = self._answers.setdefault(system, {})
        waiting.update(system.states(jobs))
        return {job: waiting.pop(job) for job in [job for job in waiting if mine(job)]}

    def _observe(self, job: Job, state: JobState) -> None:
        if id(job) not in self.live:
            return
        if not state.final:
            self.record.update(job, "running" if state.status == JobStatus.running else "queued")
            return
        self.systems[job.system].forget(job)
        self.submitters[job.system].done(job)
        outcome = JobOutcome.read(job.files, state)  # the one reading of how the job ended
        if outcome.exit_code == preemption.REQUEUE_EXIT and not self.interrupted:
            requeue = preemption.requeue_reason(outcome.exit_code, job.files.read_checkpointed(), job.requeues,
                                                job.config["max_checkpoint_requeues"])
            if requeue:  # the work saved a checkpoint on the batch system's warning: no failure, no resubmission
                job.requeues += 1
                logger.warning("Job %s: task %s %s", job.job_id, job, requeue)
                self.record.update(job, "resubmitted", requeue)
                self._queue(job)
                return
        reason = state.scheduler_side
        if (not reason and state.status == JobStatus.aborted and job.config["resubmit_failed_tasks"]
                and outcome.exit_code not in (None, 0)):
            reason = "the task failed and resubmit_failed_tasks is set"
        if not reason and state.status == JobStatus.aborted and self.retry_reason is not None:
            reason = self.retry_reason(job, outcome)
        if not reason and state.status == JobStatus.aborted and job.earlier and outcome.exit_code is None:
            # e.g. cancelled as the earlier run was interrupted, and still leaving the queue when this one began
            reason = "its job of an earlier run was killed before it could end (no exit code)"
        reason = self.healing.resubmit_reason(job, outcome, self.systems[job.system]) or reason
        if reason and job.resubmissions < job.config["max_resubmissions"] and not self.interrupted:
            self._resubmit(job, reason)
            return
        if self.healing.suspected(job) and not self.interrupted:
            logger.info("Job %s: task %s failed on a node no other node's success has cleared yet; waiting for "
                        "the run's other jobs to tell", job.job_id, job)
            self._parked[id(job)] = (job, outcome)
            return
        self._end(job, outcome)

    def _resubmit(self, job: Job, reason: str) -> None:
        job.resubmissions += 1
        logger.warning("Job %s: %s; submitting task %s again (%d of %d)", job.job_id, reason, job,
                       job.resubmissions, job.config["max_resubmissions"])
        self.record.update(job, "resubmitted", reason)
        self._queue(job)

    def _review_parked(self) -> None:
        """Parked jobs (failed on a node that may be bad, before another node had worked) go again once another
        node of their batch system has worked; they fail as they ended once their batch system has nothing else
        waiting or in flight that could tell, or when the run is interrupted."""
        for key, (job, outcome) in list(self._parked.items()):
            if id(job) not in self.live:  # cancelled meanwhile
                del self._parked[key]
                self.healing.unpark(job)
                continue
            reason = "" if self.interrupted else self.healing.parked_reason(job)
            submitter = self.submitters[job.system]
            if reason:
                del self._parked[key]
                self._resubmit(job, reason)
            elif self.interrupted or not (submitter.in_flight or submitter.waiting):
                del self._parked[key]
                self.healing.unpark(job)
                self._end(job, outcome)

    def _end(self, job: Job, outcome: JobState | JobOutcome) -> None:
        job.outcome = outcome if isinstance(outcome, JobOutcome) else JobOutcome.read(job.files, outcome)
        self.live.pop(id(job), None)
        self.submitters[job.system].done(job)
        self._ended.append(job)

    def settle(self, job: Job, ok: bool, reason: str = "") -> None:
        """The front-end's verdict on an ended job (e.g. after checking its outputs), for the record."""
        if not ok:
            logger.error("%s%s", f"Job {job.job_id}: " if job.job_id else "", reason)
        self.record.update(job, "done" if ok else "failed", reason)

    def cancel(self, jobs: Iterable[Job], reason: str = "") -> None:
        """Stop these jobs (waiting ones are dropped, submitted ones cancelled with one command per batch
        system); they are not handed back by :meth:`poll`. With a ``reason``, the record says they were
        cancelled and why."""
        by_system: dict[str, list[Job]] = {}
        for job in jobs:
            if self.live.pop(id(job), None) is None:
                continue
            if reason and job.job_id is not None and written_exit_code(job.files) == 0:
                self.record.update(job, "done")  # it ended successfully before it could be cancelled
                self.submitters[job.system].done(job)
                continue
            if reason:
                self.record.update(job, "cancelled", reason)
            self.submitters[job.system].done(job)
            if job.job_id is not None:
                by_system.setdefault(job.system, []).append(job)
        for name, chosen in by_system.items():
            logger.warning("Killing %d %s job(s)", len(chosen), name)
            if reason:
                for job in chosen:  # before the job can end: a later run reads why it ended
                    job.files.record_cancel(reason)
            self.systems[name].cancel(chosen)
            for job in chosen:
                self.systems[name].forget(job)

    def interrupt(self) -> list[str]:
        """Stop the run: nothing more is submitted, every live job is cancelled; their descriptions."""
        self.interrupted = True
        jobs = list(self.live.values())
        killed = [f"{job.system} job {job.job_id} ({job.key})" for job in jobs if job.job_id is not None]
        self.cancel(jobs, reason="cancelled when the run was interrupted")
        return killed

    def close(self) -> None:
        """The front-end has no more work for this run: batch systems let go of what they keep for it
        (worker jobs end), the last added first: pilots or bundles added over another system's inner one (a run
        without ``--batch``: ``local-pilots`` over the ``local`` system's) tell their jobs to stop before that
        system waits for its jobs that are ending (:meth:`LocalSystem.close <b2batch.systems.local.LocalSystem.close>`)."""
        for system in reversed(list(self.systems.values())):
            try:
                system.close()
            except Exception:  # an account of the run must still be given
                logger.exception("Could not close the batch system %s", system.name)

    def wait(self, seconds: float | None = None, wake: threading.Event | None = None) -> None:
        """Pause between two polls (the poll pause, or ``seconds``), until ``wake`` is set, or until a batch
        system has news (:meth:`BatchSystem.news <b2batch.engine.system.BatchSystem.news>`, looked at every
        :data:`NEWS_STEP` seconds): a unit of local pilots that ended is seen within moments, not a pause later."""
        pause = self.poll_pause if seconds is None else seconds
        watched = [system for system in self.systems.values() if system.watched()]
        if not watched:
            if wake is not None:
                wake.wait(pause)
            else:
                time.sleep(pause)
            return
        deadline = time.monotonic() + pause
        # A run of few jobs looks first after FIRST_NEWS_STEP, the step doubling up to NEWS_STEP: its polls cost
        # little, and its few jobs' ends are what its caller waits for (a Pool.map of a few chunks). Many jobs:
        # every NEWS_STEP, each poll taking what came meanwhile (a poll per unit would cost more than the units).
        step = FIRST_NEWS_STEP if len(self.live) <= FEW_JOBS else NEWS_STEP
        while (left := deadline - time.monotonic()) > 0:
            if wake is not None:
                if wake.wait(min(step, left)):
                    return
            else:
                time.sleep(min(step, left))
            step = min(2 * step, NEWS_STEP)
            if any(system.news() for system in watched):
                return

