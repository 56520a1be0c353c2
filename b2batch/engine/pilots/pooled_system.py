"""Many units of work per batch job: what pilot jobs and bundles of units have in common.

:class:`PooledSystem` is the part of :class:`~b2batch.engine.pilots.kinds.PilotSystem` and
:class:`~b2batch.engine.pilots.kinds.BundleSystem` they share: batch systems for the run, each wrapping one real
batch system (the *inner* one). Units go to a :class:`~b2batch.engine.pilots.work_queue.WorkQueue` on the shared file
system; worker jobs (:mod:`b2batch.engine.pilots.node_worker`), submitted to the inner system, run them. The run sees each
unit as a job of its own: it ends when its unit's run ends, not when its worker job does.

- **Pilots** (setting ``pilot_jobs``: M): one queue per kind of unit (same settings and workflow), at most M
  worker jobs for it. A pilot ends when nothing came to claim for ``pilot_idle_timeout`` seconds, and a new
  one is submitted when work comes again; lost pilots are replaced up to ``max_resubmissions`` times each.
- **Bundles** (setting ``tasks_per_job``: K): up to K units that are ready together get a queue of their own
  and one worker job, which ends when that queue is empty.

A worker that stops refreshing its heartbeat for ``heartbeat_timeout`` seconds, or whose batch job ended, is
given up: its claims are dropped and its units go back to the run as lost, to be submitted again (within
``max_resubmissions``), never while the worker may still run them (it stops itself at half that time).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from b2batch.engine.files import JobFiles
from b2batch.engine.job import Job
from b2batch.engine.processes import process_started
from b2batch.engine.outcome import JobOutcome, has_ended, status_of_files
from b2batch.engine.jobstate import IDLE, RUNNING, JobState, JobStatus
from b2batch.engine.system import BatchSystem
from b2batch.engine.pilots.work_queue import WorkQueue
from b2batch.errors import B2BatchError

logger = logging.getLogger(__name__)

#: The settings of the worker jobs themselves (how long they live and wait): units that differ in one of
#: them never share a worker job. The settings that shape a batch job are the inner system's
#: (``BatchSystem.job_settings``).
WORKER_SETTINGS = ("pilot_walltime", "pilot_task_seconds", "heartbeat_timeout", "pilot_idle_timeout")
#: Seconds of work that one queued batch of units holds at most, once the units' times are known.
BATCH_SECONDS = 0.5
#: Most units in one batch.
MAX_BATCH = 100
#: How many of a queue's last units' times decide the size of its batches.
RECENT_UNITS = 50


def signature(job: Job, inner: BatchSystem | type[BatchSystem]) -> str:
    """What units must share to run in one worker job of the batch system ``inner``: the settings that shape
    its jobs (none of other systems'), the worker settings and their bootstrap."""
    values = [job.bootstrap, *(job.config[name] for name in (*inner.job_settings, *WORKER_SETTINGS))]
    return hashlib.sha1(json.dumps(values, sort_keys=True, default=str).encode()).hexdigest()[:12]


def unit_name(job: Job, number: int) -> str:
    return f"{number:09d}-{hashlib.sha1(job.key.encode()).hexdigest()[:16]}"


@dataclass(eq=False)
class UnitPool:
    """One work queue, its units and its worker jobs."""

    queue: WorkQueue
    template: Job  # the unit whose settings the worker jobs take
    members: dict[str, Job] = field(default_factory=dict)  # unit name -> unit
    running: dict[str, str] = field(default_factory=dict)  # unit name -> worker
    carriers: dict[str, Job] = field(default_factory=dict)  # live worker jobs by key
    #: Workers seen: worker -> (heartbeat text, monotonic time it last changed, heartbeat).
    beats: dict[str, tuple[str, float, dict[str, Any]]] = field(default_factory=dict)
    started: set[str] = field(default_factory=set)  # keys of worker jobs that were seen at work
    queued_at: dict[str, float] = field(default_factory=dict)  # worker job key -> monotonic time submitted
    finishing: set[str] = field(default_factory=set)  # workers asked to give their slot back when idle
    failed_starts: int = 0
    lost: int = 0
    next_check: float = 0.0
    next_submit: float = 0.0
    failing_since: float | None = None
    submit_attempts: int = 0  # failed submissions of worker jobs in a row
    given_up: str = ""
    cancelled: str = ""  # why its work was cancelled on purpose (b2batch cancel), when it was
    drained: bool = False  # whether the queue says that nothing waits or runs in it for now
    steering_note: Path | None = None  # the note that this steering process uses the queue
    #: How long its last units ran (their workers' word), the longest first matters.
    recent: deque[float] = field(default_factory=lambda: deque(maxlen=RECENT_UNITS))
    #: What the queue held when this steering process took it up (:meth:`PooledSystem.attach`): the units that
    #: wait, and those held by workers: name -> worker.
    earlier: tuple[set[str], dict[str, str]] | None = None
    #: Units tracked and journaled but not yet in the queue (a pilot queue gathers them into batches): (name,
    #: entry), in the order they came, and since when the first waits.
    staged: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    staged_since: float = 0.0
    pending: set[str] = field(default_factory=set)  # batches queued whose first start was not seen yet

    def waiting(self) -> int:
        return len(self.members) - len(self.running)

    def target_batch(self) -> int:
        """Units one batch may hold: as many as the longest of the last :data:`RECENT_UNITS` units ran in
        :data:`BATCH_SECONDS`, at most :data:`MAX_BATCH`; 1 while no unit has ended (they may take hours: a
        batch is not shared between workers, so its units wait for each other)."""
        if not self.recent:
            return 1
        return max(1, min(MAX_BATCH, int(BATCH_SECONDS / max(max(self.recent), 1e-4))))

    def batch_size(self, units: int, workers: int) -> int:
        """Units per batch when ``units`` go into the queue at once for ``workers`` workers: at most
        :meth:`target_batch`, and every worker gets a batch of them."""
        return max(1, min(self.target_batch(), -(-units // max(1, workers))))

    def ran_for(self, seconds: float) -> None:
        self.recent.append(seconds)


class PooledSystem(BatchSystem):
    """Units run by worker jobs of the batch system ``inner``."""

    kind = "worker"
    pooled = True
    #: Seconds :meth:`close` gives running pilots to end by themselves before it cancels them.
    CLOSE_WAIT = 3.0

    def __init__(self, run: Any, inner: BatchSystem) -> None:
        super().__init__(run)
        self.inner = inner
        self.name = f"{inner.name}-{self.kind}s"  # type: ignore[misc]
        self.pools: dict[str, UnitPool] = {}
        self._pool_of: dict[int, tuple[UnitPool, str]] = {}  # id(unit) -> (pool, unit name)
        self._closed = False

    # --- worker jobs --------------------------------------------------------------------------------

    def needs_job_script(self, job: Job) -> bool:
        return False  # a worker job runs the unit: its front-end writes no wrapper

    def _carrier(self, pool: UnitPool, idle_timeout: float) -> Job:
        """A new worker job for ``pool``: its spec and wrapper written, not submitted."""
        job_wrapper = self.run.config.job_wrapper  # the front-end's job-script maker (the engine has none)
        if job_wrapper is None:
            raise B2BatchError(f"The run has no job-script maker for the {self.kind} jobs of "
                               f"{pool.template.family}: make its Run with config=b2batch.settings.runconfig.run_config().")
        template = pool.template
        number = self.run.next_number()
        key = f"{self.kind}-{self.run.tag}-{number}"
        files = JobFiles.at(pool.queue.root, "jobs", key,
                            self.run.config.resolve(template.config["log_dir"]) / f"{self.kind}s" / key)
        carrier = Job(key=key, name=f"{self.kind} job {number} for {template.family}", family=template.family,
                      system=self.inner.name, files=files, config=template.config)
        files.make_folders()
        spec = dict(template.bootstrap or {})
        spec["worker"] = {"queue": str(pool.queue.root), "idle_timeout": idle_timeout,
                          "heartbeat_timeout": template.config["heartbeat_timeout"],
                          "walltime": template.config["pilot_walltime"],
                          "unit_seconds": template.config["pilot_task_seconds"], "worker": key}
        if self.run.config.workers_end_with_steering:  # a run without --batch: its pilots end with it
            spec["worker"]["steering"] = {"host": socket.gethostname(), "pid": os.getpid(),
                                          "started": process_started(os.getpid())}
        files.write_spec(spec)
        files.write_wrapper(job_wrapper(template.name, key, template.config, files, [str(files.spec)]))
        files.reset()
        return carrier

    def _submit_carriers(self, pools: dict[str, UnitPool], carriers: list[Job]) -> None:
        """Submit worker jobs (as arrays where the inner system has them), each for the pool ``pools[key]``;
        errors propagate."""
        for group in self.inner.groups(carriers):
            self.inner.submit(group)
            for carrier in group:
                pools[carrier.key].carriers[carrier.key] = carrier
                pools[carrier.key].queued_at[carrier.key] = time.monotonic()
                carrier.files.record_submission(self.inner.name, str(carrier.job_id), carrier.placement)
                carrier.name = f"{self.kind} job {carrier.job_id} for {carrier.family}"  # the scheduler's id, as everywhere
                logger.info("%s: submitted %s", self.inner.name, carrier.name)
                self.run.record.worker_job(carrier.key, kind=self.kind, family=carrier.family, system=self.inner.name,
                                           job_id=str(carrier.job_id), state="queued", submitted_at=time.time())

    def _describe(self, pool: UnitPool, worker: str, job_id: str | None = None) -> tuple[str, str]:
        """The batch job id of a worker, and how messages name it."""
        carrier = pool.carriers.get(worker)
        beat = pool.beats.get(worker, ("", 0.0, {}))[2]
        if carrier is not None and carrier.job_id:
            job_id = str(carrier.job_id)  # the batch system's own name for it
        job_id = str(job_id or beat.get("job_id", "?"))
        log = carrier.files.stderr if carrier is not None else ""
        return job_id, f"{self.kind} job {job_id} on {self.inner.name}" + (f" (its log: {log})" if log else "")

    # --- following units ----------------------------------------------------------------------------

    def _journal(self, pool: UnitPool, name: str, job: Job) -> None:
        """Write the unit's journal (its queue and name there) before it enters the queue: a steering process
        killed right after the unit went in leaves a journal by which the next one finds it, not a second unit."""
        job.placement = {"queue": str(pool.queue.root), "unit": name}
        job.files.record_submission(job.system, "", job.placement)
        job.journal_written = True

    def _track(self, pool: UnitPool, name: str, job: Job) -> None:
        pool.members[name] = job
        self._pool_of[id(job)] = (pool, name)
        job.placement = {"queue": str(pool.queue.root), "unit": name}

    def _untrack(self, job: Job) -> tuple[UnitPool, str] | None:
        found = self._pool_of.pop(id(job), None)
        if found is not None:
            pool, name = found
            pool.members.pop(name, None)
            pool.running.pop(name, None)
        return found

    def _entry(self, job: Job) -> dict[str, Any]:
        if job.unit is None:
            raise B2BatchError(f"{job.name} cannot run in a {self.kind} job: its front-end gives no way to run it "
                               f"there. Set tasks_per_job = 1 and pilot_jobs = 0 for it.")
        files = job.files
        files.make_folders()
        _logs, stdout, stderr, exit_code, _setup_failed = files.wrapper_paths()
        unit = job.unit
        if "job_files" in unit:  # arguments that are the unit's own files (a front-end's unit shared by its jobs)
            unit = {**{k: v for k, v in unit.items() if k != "job_files"},
                    "args": [*unit.get("args", ()), *(files.path_of(name) for name in unit["job_files"])]}
        return {"key": job.key, "name": job.name, "unit": unit,
                "files": {"exit_code": exit_code, "stdout": stdout, "stderr": stderr}}

    def states(self, jobs: Iterable[Job]) -> dict[Job, JobState]:
        changes: dict[Job, JobState] = {}
        ended = self._ended_carriers()
        for key, pool in list(self.pools.items()):
            self._follow(pool, changes, ended)
            if self._finished(pool):
                del self.pools[key]
        return changes

    def _ended_carriers(self) -> dict[str, JobState]:
        """The worker jobs of every pool that ended, by key: one status query for all of them, each answer
        going to the pool of its job (the inner system may answer for other jobs of it too)."""
        carriers = {carrier.key: carrier for pool in self.pools.values() for carrier in pool.carriers.values()}
        if not carriers:
            return {}
        answer = self.run.states(self.inner, list(carriers.values()),
                                 lambda job: carriers.get(job.key) is job)
        return {carrier.key: state for carrier, state in answer.items() if state.final}

    def _follow(self, pool: UnitPool, changes: dict[Job, JobState], ended: dict[str, JobState]) -> None:
        if pool.members and (pool.cancelled or (reason := pool.queue.cancel_reason())):
            # b2batch cancel: what waits (or was put back by a worker as it was cancelled) fails; no pilot comes
            pool.cancelled = pool.cancelled or reason
            self._give_up(pool, f"its {self.kind} queue was {pool.cancelled}", changes)
        for carrier in [carrier for key, carrier in pool.carriers.items() if key in ended]:
            self._carrier_ended(pool, carrier, ended[carrier.key], changes)
        now = time.monotonic()
        if now >= pool.next_check:
            pool.next_check = now + max(1.0, pool.template.config["heartbeat_timeout"] / 6)
            self._check_heartbeats(pool, now, changes)
        if not pool.members:
            return
        self._take_done(pool, changes)
        self._top_up(pool, changes)

    def _started(self, pool: UnitPool, worker: str) -> None:
        """A worker job was seen at work (a heartbeat or a claim)."""
        if worker not in pool.started:
            pool.started.add(worker)
            self.run.record.worker_job(worker, state="running", started_at=time.time())

    def _take_done(self, pool: UnitPool, changes: dict[Job, JobState]) -> None:
        """What the workers' logs say since the last poll: units whose run started (running), was put back
        (waiting again: the worker's allocation ended) or ended (successful with exit code 0, else aborted; the
        run and front-end judge)."""
        for line in pool.queue.take_log():
            name = line.pop("name")
            job = pool.members.get(name)
            if job is None:
                continue
            worker = line.get("worker") or pool.running.get(name, "")
            if "start" in line:
                pool.pending.discard(pool.queue.batch_of(name))
                pool.running[name] = worker
                self._started(pool, worker)
                job.job_id, job.carrier = self._describe(pool, worker)
                changes[job] = RUNNING
                continue
            if line.get("released"):
                pool.running.pop(name, None)
                changes[job] = IDLE
                continue
            if line.get("skipped"):
                pool.pending.discard(pool.queue.batch_of(name))
                continue
            self._untrack(job)
            pool.queue.forget_unit(name)
            if worker:
                job.job_id, job.carrier = self._describe(pool, worker, line.get("job_id"))
                self._started(pool, worker)  # it ran the unit, also if no heartbeat of it was seen
                self.run.record.worker_job(worker, units=1)
            if line.get("started") and line.get("ended"):
                job.ran = (float(line["started"]), float(line["ended"]))
                pool.ran_for(job.ran[1] - job.ran[0])
            if isinstance(line.get("exit_code"), int):
                job.files.known_exit_code(line["exit_code"])  # written to its file before this line
            by_files = status_of_files(job.files)  # a unit's end is its exit code alone
            changes[job] = JobState(JobStatus.aborted if by_files is None else by_files)

    def _carrier_ended(self, pool: UnitPool, carrier: Job, state: JobState, changes: dict[Job, JobState]) -> None:
        self._take_done(pool, changes)  # what it finished before it ended counts
        carrier.outcome = ended = JobOutcome.read(carrier.files, state)
        self.run.record.worker_job(carrier.key, ended_at=time.time(), state=(
            "cancelled" if ended.cancelled or pool.cancelled else "done" if ended.exit_code == 0 else "failed"))
        pool.carriers.pop(carrier.key, None)
        pool.queued_at.pop(carrier.key, None)
        pool.finishing.discard(carrier.key)
        self.inner.forget(carrier)
        held = self._held(pool, carrier.key)
        cancelled = pool.cancelled or ended.cancelled
        if held and cancelled:
            self._drop(pool, carrier.key, held, f"its {self.kind} job {carrier.job_id} was {cancelled}", changes)
        elif held:
            pool.lost += 1
            why = state.scheduler_side or state.reason or f"exit code {ended.exit_code}"
            self._lose(pool, carrier.key, held, f"its {self.kind} job {carrier.job_id} on {self.inner.name} ended "
                       f"while running it ({why}); its log: {carrier.files.stderr}", changes)
        elif cancelled:
            pass  # cancelled on purpose (b2batch cancel): no failed start
        elif carrier.key not in pool.started and not state.scheduler_side and ended.exit_code != 0:
            pool.failed_starts += 1
            limit = pool.template.config["max_resubmissions"]
            message = carrier.failure_message().replace(f"Task {carrier.family} (no parameters) failed",
                                                        f"The {self.kind} job could not run")
            logger.warning("%s (%d of %d)", message.splitlines()[0], pool.failed_starts, limit + 1)
            if pool.failed_starts > limit or self.kind == "bundle":
                self._give_up(pool, message, changes)
        pool.queue.forget_worker(carrier.key)
        pool.beats.pop(carrier.key, None)
        if ended.exit_code == 0:
            _remove_tree(carrier.files.folder)  # a failed one keeps its files for a look

    def _check_heartbeats(self, pool: UnitPool, now: float, changes: dict[Job, JobState]) -> None:
        timeout = pool.template.config["heartbeat_timeout"]
        beats = pool.queue.heartbeats()
        for worker, (text, beat) in beats.items():
            if pool.queue.is_revoked(worker):
                continue
            seen = pool.beats.get(worker)
            if seen is None or seen[0] != text:
                pool.beats[worker] = (text, now, beat)
                self._started(pool, worker)
            elif now - seen[1] > timeout:
                pool.lost += 1
                job_id, what = self._describe(pool, worker)
                logger.warning("%s: no heartbeat for %.0f s (setting heartbeat_timeout); giving it up", what,
                               now - seen[1])
                pool.queue.revoke(worker)
                carrier = pool.carriers.pop(worker, None) or Job(
                    key=worker, name=what, family=pool.template.family, system=self.inner.name,
                    files=pool.template.files, config=pool.template.config, job_id=job_id)
                try:
                    self.inner.cancel([carrier])
                except B2BatchError as e:
                    logger.warning("Could not cancel %s: %s", what, e)
                self.inner.forget(carrier)
                self._take_done(pool, changes)
                held = self._held(pool, worker)
                self._lose(pool, worker, held, f"its {what} stopped sending heartbeats for {timeout:g} s", changes)
        for worker in [w for w in pool.beats if w not in beats]:
            del pool.beats[worker]  # it ended and cleaned up after itself

    def _held(self, pool: UnitPool, worker: str) -> list[str]:
        """The units a gone worker started and did not finish (after the units of its claims whose run had not
        started went back into the queue, as they were: they wait again)."""
        held = pool.queue.held(worker)
        for name in pool.queue.requeue_claims(worker, {name for name, started in held.items() if not started}):
            pool.running.pop(name, None)
        return [name for name, started in held.items() if started]

    def _lose(self, pool: UnitPool, worker: str, names: list[str], reason: str, changes: dict[Job, JobState]) -> None:
        """The units a worker held when it was lost go back to the run, which submits them again."""
        wanted = self.wanted(pool) if self.kind == "pilot" else 1  # type: ignore[attr-defined]
        limit = pool.template.config["max_resubmissions"] * max(1, wanted or 1)
        if self.kind == "pilot" and pool.lost > limit:
            self._give_up(pool, f"{pool.lost} {self.kind} jobs were lost (at most max_resubmissions x pilot_jobs = "
                                f"{limit}); the last: {reason}", changes)
        pool.queue.drop_claims(worker)
        for name in names:
            pool.queue.forget_unit(name)
            job = pool.members.get(name)
            if job is not None:
                self._untrack(job)
                changes[job] = JobState(JobStatus.aborted, reason, scheduler_side=reason)

    def _drop(self, pool: UnitPool, worker: str, names: list[str], reason: str, changes: dict[Job, JobState]) -> None:
        """The units a cancelled worker held fail with ``reason`` (not run again: cancelled on purpose)."""
        pool.queue.drop_claims(worker)
        for name in names:
            job = pool.members.get(name)
            if job is not None:
                self._untrack(job)
                changes[job] = JobState(JobStatus.aborted, reason)

    def _give_up(self, pool: UnitPool, message: str, changes: dict[Job, JobState]) -> None:
        """No more worker jobs for this pool: its units that wait fail with ``message``."""
        pool.given_up = message
        for name in self._take_back_many(pool, [name for name in pool.members if name not in pool.running]):
            job = pool.members[name]
            self._untrack(job)
            changes[job] = JobState(JobStatus.aborted, message)

    @staticmethod
    def _take_back_many(pool: UnitPool, names: list[str]) -> set[str]:
        """Take units that wait out of the pool (staged, or in a batch no worker claimed); those taken."""
        wanted = set(names)
        taken = {name for name, _entry in pool.staged if name in wanted}
        if taken:
            pool.staged = [(name, entry) for name, entry in pool.staged if name not in taken]
        rest = [name for name in names if name not in taken]
        if rest:
            taken |= pool.queue.take_back_many(rest)
            todo = os.fspath(pool.queue.todo)  # batches taken back whole no longer wait
            pool.pending = {batch for batch in pool.pending if os.path.exists(f"{todo}/{batch}.json")}
        return taken

    def _top_up(self, pool: UnitPool, changes: dict[Job, JobState]) -> None:
        """Submit worker jobs while units wait and fewer than wanted are alive (pilots only)."""

    def _finished(self, pool: UnitPool) -> bool:
        return False

    # --- the run's calls ----------------------------------------------------------------------------

    def cancel(self, jobs: list[Job]) -> None:
        by_pool: dict[int, tuple[UnitPool, list[str]]] = {}
        for job in jobs:
            found = self._untrack(job)
            if found is not None:
                by_pool.setdefault(id(found[0]), (found[0], []))[1].append(found[1])
        for pool, names in by_pool.values():
            taken = self._take_back_many(pool, names)
            pool.queue.cancel_many([name for name in names if name not in taken])
        if self.run.interrupted:
            self.close()

    def forget(self, job: Job) -> None:
        self._untrack(job)

    def close(self) -> None:
        """No more work: worker jobs end. Queued ones are cancelled; running pilots are told to stop and, if
        they have not ended within :attr:`CLOSE_WAIT` seconds (at once when the run was interrupted), cancelled
        too: no allocation outlives its steering process. A bundle job holding units finishes them."""
        if self._closed:
            return
        self._closed = True
        for pool in self.pools.values():
            pool.queue.finish_all()
            # A bundle job whose units all ended has run and ends by itself; only pilots may wait for nothing.
            waiting = [c for c in pool.carriers.values()
                       if c.key not in pool.started and (self.kind == "pilot" or pool.members)]
            self._cancel_carriers(pool, waiting, "that wait")
        if self.kind == "pilot":
            deadline = time.monotonic() + (0.0 if self.run.interrupted else self.CLOSE_WAIT)
            while True:
                running = {key: pool for pool in self.pools.values() for key in pool.carriers
                           if key in pool.started and (pool.queue.workers / f"{key}.json").exists()}
                if not running or time.monotonic() >= deadline:
                    break
                time.sleep(0.1)
            for pool in self.pools.values():
                self._cancel_carriers(pool, [pool.carriers[key] for key in running if running[key] is pool],
                                      "still running")
                for key in [k for k in pool.carriers if k in pool.started and k not in running]:
                    self.run.record.worker_job(key, state="done", ended_at=time.time())  # it ended by itself
                    self.inner.ended_unpolled(pool.carriers[key])  # its accounting, when the inner system closes
        for pool in self.pools.values():
            if pool.steering_note is not None:
                pool.steering_note.unlink(missing_ok=True)

    def _cancel_carriers(self, pool: UnitPool, carriers: list[Job], which: str) -> None:
        if not carriers:
            return
        try:
            self.inner.cancel(carriers)
            logger.info("Cancelled %d %s job(s) %s: %s", len(carriers), self.kind, which,
                        ", ".join(str(c.job_id) for c in carriers))
            for carrier in carriers:
                self.run.record.worker_job(carrier.key, state="cancelled", ended_at=time.time())
        except B2BatchError as e:
            logger.warning("Could not cancel %d %s job(s) %s: %s", len(carriers), self.kind, which, e)

    def attach(self, job: Job, journal: dict[str, Any]) -> bool:
        """Follow a unit that a steering process before this one queued, if it is still queued or held by a
        live worker."""
        root, name = journal.get("queue"), journal.get("unit")
        if not root or not name or not Path(root, "todo").is_dir():
            return False
        pool = self._adopt(job, Path(root))
        waiting, holders = self._earlier(pool)
        if name in waiting and (pool.carriers or pool.beats or self.kind == "pilot"):
            self._track(pool, name, job)
            job.job_id = ""
            return True
        holder = holders.get(name)
        if holder is not None:
            self._track(pool, name, job)
            job.job_id = str(pool.beats[holder][2].get("job_id", ""))
            return True
        if name in waiting:
            pool.queue.take_back(name)
        return False

    def _earlier(self, pool: UnitPool) -> tuple[set[str], dict[str, str]]:
        """What the queue held when this steering process took it up: the units that wait, and those held by
        live workers (name -> worker; running where its log says so). The claims of workers that are gone go
        back into the queue first, but for the units whose run started (they are not run again here: their
        tasks go out anew, as the run decides)."""
        if pool.earlier is None:
            queue = pool.queue
            for worker in queue.claimed_batches():
                if worker not in pool.beats:
                    held = queue.held(worker)
                    queue.requeue_claims(worker, {name for name, started in held.items() if not started})
            holders: dict[str, str] = {}
            for worker in pool.beats:
                for name, started in queue.held(worker).items():
                    holders[name] = worker
                    if started:
                        pool.running[name] = worker
            pool.earlier = (queue.index_waiting(), holders)
        return pool.earlier

    def _adopt(self, job: Job, root: Path) -> UnitPool:
        """The pool at ``root`` of an earlier steering process, with its worker jobs that still run."""
        pool = self.pools.get(str(root))
        if pool is None:
            pool = self.pools[str(root)] = UnitPool(queue=WorkQueue(root), template=job)
            pool.queue.create()
            pool.queue.stop_file.unlink(missing_ok=True)
            pool.queue.cancel_note.unlink(missing_ok=True)  # a cancel of an earlier run's work is not this run's
            pool.queue.drain(False)
            pool.steering_note = pool.queue.add_steering(
                f"{socket.gethostname()}-{os.getpid()}-{self.run.tag}",
                {"host": socket.gethostname(), "pid": os.getpid(), "started": process_started(os.getpid()),
                 "tag": self.run.tag})
            pool.queue.take_done()  # results of units of earlier runs: their exit codes are in their own files
            pool.queue.forget_logs(alive={p.stem for p in pool.queue.workers.glob("*.json")})
            self._adopt_carriers(pool)
        return pool

    def _adopt_carriers(self, pool: UnitPool) -> None:
        """Follow the worker jobs of earlier steering processes that the inner batch system still has."""
        for folder in sorted({path.parent for name in ("submission.json", "submitting.json")
                              for path in pool.queue.root.glob(f"jobs/*/{name}")}):
            if has_ended(folder):
                _remove_tree(folder)  # a worker job that ended: nothing to follow
                continue
            stub = self._earlier_carrier(pool, folder)
            if stub is not None:
                pool.carriers[stub.key] = stub
                logger.info("Following %s", stub.name)
        self._check_heartbeats(pool, time.monotonic(), {})  # live workers of an earlier run count

    def _earlier_carrier(self, pool: UnitPool, folder: Path) -> Job | None:
        """The worker job of an earlier steering process in ``folder`` if the inner batch system still has it:
        the one its journal names, or the one that carries the tag of its intent (a steering process killed
        while it submitted the job; its journal is written now)."""
        files = JobFiles(folder=folder, log_folder=self.run.config.resolve(pool.template.config["log_dir"])
                         / f"{self.kind}s" / folder.name)
        intent, journal = files.read_intent(), files.read_submission()
        stub = Job(key=folder.name, name=f"{self.kind} job of an earlier run", family=pool.template.family,
                   system=self.inner.name, files=files, config=pool.template.config)
        if intent is not None:
            if intent.get("system") != self.inner.name or not self.inner.adopt(stub, intent):
                return None
            files.record_submission(self.inner.name, str(stub.job_id), stub.placement)
        elif not (journal and journal.get("system") == self.inner.name and self.inner.attach(stub, journal)):
            return None
        else:
            stub.job_id = str(journal.get("job_id"))
        stub.name = f"{self.kind} job {stub.job_id} of an earlier run"
        return stub


def _remove_tree(root: Path) -> None:
    import shutil

    shutil.rmtree(root, ignore_errors=True)
