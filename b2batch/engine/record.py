"""What happened to every job of a run: the one record that progress displays, summaries and timelines
read. The run reports each change of a job's state here; listeners (e.g. a live progress display) are told
of each change as it happens. Front-ends also note the work they expect to become jobs (:meth:`expect`), so
that a display can count what waits before it has a job.

A run of a million small units (``b2batch.Pool``, joblib) must not keep a record per unit for ever: with
``keep_ended=N`` the record keeps the last N ended jobs one by one and folds older ones into counts per task
family and batch system (:attr:`RunRecord.folded`), telling its ``forgetters`` which job it let go. A run report,
which lists every job, keeps them all (it sets ``keep_ended`` to None).
"""

from __future__ import annotations

import functools
import os
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from b2batch.engine.usage import Usage, read_usage, usage_file


#: The folder of a worker's log (the same few for every unit of a run).
_folder_of = functools.lru_cache(maxsize=64)(os.path.dirname)


@dataclass(slots=True)
class JobRecord:
    """One unit of work's job (or jobs, when it was resubmitted) in this run."""

    task_id: str
    family: str
    params: dict[str, str]
    system: str
    job_ids: list[str] = field(default_factory=list)
    state: str = "waiting"  # waiting, submitted, queued, running, done, failed, resubmitted, cancelled
    submitted_at: float | None = None
    started_at: float | None = None
    ended_at: float | None = None
    reason: str = ""
    resubmissions: list[str] | tuple[()] = ()  # the reason of each (a list from the first one)
    #: The folder of the job's logs ``stdout`` and ``stderr`` (the job files' own text, not a copy: a run keeps
    #: a record per job); empty while unknown.
    logs: str = ""
    stderr_tail: str = ""
    #: The worker job (pilot or bundle) that ran the unit, e.g. "pilot job 123 on slurm"; empty for own jobs.
    carrier: str = ""
    #: What the job used (:meth:`b2batch.engine.usage.Usage.as_dict`): its wrapper's figures, with the batch
    #: system's accounting where it answered; None while neither is known.
    usage: dict[str, Any] | None = None

    @property
    def stdout(self) -> str:
        """The path of the job's stdout log ("" while unknown)."""
        return f"{self.logs}/stdout" if self.logs else ""

    @property
    def stderr(self) -> str:
        """The path of the job's stderr log ("" while unknown)."""
        return f"{self.logs}/stderr" if self.logs else ""

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in RECORD_FIELDS}


#: What a record says of its job (its fields, with the two log paths in place of their folder).
RECORD_FIELDS = tuple(name for f in fields(JobRecord)
                       for name in (("stdout", "stderr") if f.name == "logs" else (f.name,)))

Listener = Callable[[JobRecord], None]

#: The states a job's record ends in (it may leave "failed" and "cancelled" again only through a resubmission).
ENDED = frozenset({"done", "failed", "cancelled"})


@dataclass(slots=True)
class Folded:
    """Ended jobs of one task family on one batch system that the record no longer keeps one by one."""

    #: How many ended in each state (done, failed, cancelled).
    states: Counter[str] = field(default_factory=Counter)
    #: Their batch jobs (a unit in a worker job counts that job) and resubmissions.
    jobs: int = 0
    resubmissions: int = 0


class RunRecord:
    """The jobs of one run, by key (a luigi task's id)."""

    def __init__(self, keep_ended: int | None = None) -> None:
        self.jobs: dict[str, JobRecord] = {}
        #: Ended jobs kept one by one (the most recent); None: all of them. Older ones go into :attr:`folded`.
        self.keep_ended = keep_ended
        #: Ended jobs let go, by (family, system).
        self.folded: dict[tuple[str, str], Folded] = {}
        #: Called with a job's key when its record is let go (e.g. a display's own index of jobs).
        self.forgetters: list[Callable[[str], None]] = []
        self._ended: deque[str] = deque()  # keys in the order their jobs ended (while keep_ended is set)
        self.started_at = time.time()
        self.listeners: list[Listener] = []
        #: Called without arguments after any change, expectations included (e.g. to redraw a display).
        self.watchers: list[Callable[[], None]] = []
        #: Work a front-end expects to run as jobs and that has no job yet: key -> (family, system).
        self.expected: dict[str, tuple[str, str]] = {}
        #: How many scheduler commands the run's batch systems ran, by program (``sbatch``, ``squeue`` ...).
        self.scheduler_calls: Counter[str] = Counter()
        #: How each batch system's accounting went: the command that answered (``sacct``), or ``unavailable:
        #: <why>`` (the figures are then the job wrappers' own).
        self.accounting: dict[str, str] = {}
        #: Pilot and bundle jobs that ended last, whose accounting figures the run did not wait for, by batch
        #: system: ``{"tag": the run's tag, "jobs": {job id: key}}`` (the report completes them after the run).
        self.accounting_pending: dict[str, dict[str, Any]] = {}
        #: The job shape each family got when the run chose it (``job_shape`` auto), by family: its batch
        #: system, ``shape``, ``size``, ``why``, ``median_seconds``, ``ended`` and ``units`` (units per shape).
        self.shapes: dict[str, dict[str, Any]] = {}
        #: What the run's self-healing policies did (b2batch.engine.healing): "escalation" and "nodes".
        self.policies: dict[str, Any] = {}
        #: The run's pilot and bundle jobs by key: ``kind``, ``family``, ``system``, ``job_id`` (the scheduler's),
        #: ``state`` (queued, running, done, failed, cancelled), ``submitted_at``, ``started_at``, ``ended_at``
        #: and ``units`` (units it ran): what the report and history count as batch jobs beside the own jobs.
        self.worker_jobs: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def worker_job(self, key: str, units: int = 0, **fields: Any) -> None:
        """Note what happened to the pilot or bundle job ``key`` (its fields as :attr:`worker_jobs` has them;
        ``units``: how many more units it ran)."""
        with self._lock:
            entry = self.worker_jobs.get(key)
            if entry is None:
                if "kind" not in fields:
                    return  # not one of this run's worker jobs (e.g. an earlier run's, followed)
                entry = self.worker_jobs[key] = {"units": 0}
            entry.update(fields)
            entry["units"] += units
        self._tell(None)

    def count_call(self, program: str) -> None:
        """Count one scheduler command of ``program``."""
        with self._lock:
            self.scheduler_calls[program] += 1

    def account(self, key: str, job_id: str, usage: Usage) -> None:
        """The batch system's accounting figures of job ``job_id`` of the work ``key`` (its last job only),
        merged with the wrapper's figures."""
        with self._lock:
            worker = self.worker_jobs.get(key)
            if worker is not None and worker.get("job_id") == job_id:  # a pilot or bundle job
                worker["usage"] = usage.merged(Usage.of(worker.get("usage"))).as_dict()
                return
            record = self.jobs.get(key)
            if record is None or (record.job_ids and record.job_ids[-1] != job_id):
                return
            record.usage = usage.merged(Usage.of(record.usage)).as_dict()

    def expect(self, key: str, family: str, system: str) -> None:
        """Note work that will become a job of ``system`` (counted as waiting until it has one)."""
        with self._lock:
            if key not in self.jobs:
                self.expected[key] = (family, system)
        self._tell(None)

    def settle(self, key: str) -> None:
        """Work noted with :meth:`expect` will not become a job after all (complete already, or it cannot run)."""
        with self._lock:
            self.expected.pop(key, None)
        self._tell(None)

    def job(self, job: Any) -> JobRecord:
        """The record of the engine job ``job`` (made at its first change)."""
        with self._lock:
            record = self.jobs.get(job.key)
            if record is None:
                record = JobRecord(task_id=job.key, family=job.family, params=job.params, system=job.system,
                                   logs=job.files.log_folder_text)
                self.jobs[job.key] = record
                self.expected.pop(job.key, None)
        return record

    def update(self, job: Any, state: str, reason: str = "") -> None:
        """Record that ``job`` is now in ``state`` (one of JobRecord.state's values)."""
        record = self.job(job)
        now = time.time()
        if state == "submitted":
            record.submitted_at = record.submitted_at or now
            if job.job_id and job.job_id not in record.job_ids:
                record.job_ids.append(job.job_id)
        elif state == "running" and record.started_at is None:
            record.started_at = now
            if job.job_id and job.job_id not in record.job_ids:  # a unit in a worker job: that job's id
                record.job_ids.append(job.job_id)
            record.carrier = getattr(job, "carrier", "")
        elif state in ("done", "failed", "cancelled"):
            record.ended_at = now
            record.reason = reason
            if getattr(job, "carrier", ""):  # a unit in a worker job: as the worker saw it
                record.carrier = job.carrier
                if job.job_id and job.job_id not in record.job_ids:
                    record.job_ids.append(job.job_id)
                if job.ran:
                    record.started_at, record.ended_at = job.ran
            part = job.files.log_part("stdout") if hasattr(job.files, "log_part") else None
            if part:  # it wrote into its worker's logs (unit_logs "pilot"): those are the ones to look at
                record.logs = _folder_of(part[0])
            if state == "failed":
                record.stderr_tail = job.files.stderr_tail(10)
            measured = getattr(job, "measured", None)  # a unit's, from its worker's log; else its wrapper's file
            outcome = getattr(job, "outcome", None)  # the batch system's cause and node of the job's end
            cause, node = getattr(outcome, "cause", "") or "", getattr(outcome, "node", "") or None
            if measured and not (cause or node or record.usage):  # most units of pilots: their figures as said
                record.usage = Usage.clean(measured)
            else:
                wrapper = Usage.of(measured) if measured else read_usage(usage_file(job.files))
                if cause or node:
                    said = Usage(cause=cause, host=node)
                    wrapper = said.merged(wrapper) if wrapper is not None else said
                if wrapper is not None:
                    known = Usage.of(record.usage)
                    record.usage = (known.merged(wrapper) if known else wrapper).as_dict()
        elif state == "resubmitted":
            record.resubmissions = [*record.resubmissions, reason]
            record.usage = None
            record.started_at = None
        if record.state == state:
            return
        record.state = state
        self._tell(record)
        if state in ENDED and self.keep_ended is not None:
            self._ended.append(record.task_id)
            while len(self._ended) > self.keep_ended:
                self._fold(self._ended.popleft())

    def _fold(self, key: str) -> None:
        """Let the record of an ended job go, counting it in :attr:`folded` (a job resubmitted since it ended is
        kept: its key comes again when it ends again)."""
        with self._lock:
            record = self.jobs.get(key)
            if record is None or record.state not in ENDED:
                return
            del self.jobs[key]
            folded = self.folded.get((record.family, record.system))
            if folded is None:
                folded = self.folded[(record.family, record.system)] = Folded()
            folded.states[record.state] += 1
            folded.jobs += len(record.job_ids)
            folded.resubmissions += len(record.resubmissions)
        for forget in list(self.forgetters):
            forget(key)

    def _tell(self, record: JobRecord | None) -> None:
        if record is not None:
            for listener in list(self.listeners):
                listener(record)
        for watcher in list(self.watchers):
            watcher()
