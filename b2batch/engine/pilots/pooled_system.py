"""Many units of work per batch job: what pilot jobs and bundles of units have in common.

:class:`PooledSystem` is the part of :class:`~b2batch.engine.pilots.kinds.PilotSystem` and
:class:`~b2batch.engine.pilots.kinds.BundleSystem` they share: batch systems for the run, each wrapping one real
batch system (the *inner* one). Units go to a :class:`~b2batch.engine.pilots.work_queue.WorkQueue` on the shared file
system; worker jobs (:mod:`b2batch.engine.pilots.node_worker`), submitted to the inner system, run them. The run sees each
unit as a job of its own: it ends when its unit's run ends, not when its worker job does. The worker jobs
themselves (submitted, followed by their heartbeats, ended) are
:class:`~b2batch.engine.pilots.worker_jobs.WorkerJobs`'s, on which :class:`PooledSystem` builds; a pool of units
is a :class:`~b2batch.engine.pilots.unit_pool.UnitPool`.

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

import base64
import logging
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from b2batch.engine.job import Job
from b2batch.engine.processes import host_name, note_lives, process_started
from b2batch.engine.outcome import status_of_files, written_exit_code
from b2batch.engine.jobstate import IDLE, RUNNING, JobState, JobStatus
from b2batch.engine.system import BatchSystem
from b2batch.engine.pilots.unit_pool import UnitPool
from b2batch.engine.pilots.work_queue import WorkQueue, is_end
from b2batch.engine.pilots.worker_jobs import WorkerJobs
from b2batch.errors import B2BatchError

logger = logging.getLogger(__name__)


#: Most bytes of a unit's input (:attr:`~b2batch.engine.job.Job.inline`) carried in its queue entry (base64) rather
#: than in a file of a job folder of its own.
INLINE_LIMIT = 64 * 1024

#: How many files a second the steering process looks at for news of workers on a cluster's shared file system (a
#: listing and a stat per worker log of each queue: :meth:`PooledSystem.news`), and how often it looks at least
#: and at most: two pilots are looked at every 50 ms, a hundred every 0.2 s (the run's poll pause).
REMOTE_NEWS_FILES_PER_SECOND = 500
REMOTE_NEWS_EVERY = (0.05, 0.2)

#: Seconds a restarted run waits for the workers of an earlier run that stop because their steering process is
#: gone (a worker SIGKILLs its unit 10 s after it found that; some more for a loaded node).
ENDING_WAIT = 30.0


def _folderless(job: Job) -> bool:
    """Whether a unit goes out without a job folder: its input is in memory and small, no later steering process
    follows it (:attr:`~b2batch.engine.job.Job.journaled`: it reads no journal and no exit code's file of it),
    and its unit takes no paths of the job's files."""
    return (job.inline is not None and not job.journaled and len(job.inline[1]) <= INLINE_LIMIT
            and job.unit is not None and "job_files" not in job.unit)


def _wait_for_ending(pool: UnitPool) -> None:
    """Wait for the live workers of the pool that end with a steering process that is gone (the local pilots
    of a killed run without ``--batch``): they stop the units they run, which would be followed here to that
    failure. Once they ended, what they held goes again as the run decides. One that is still there after
    :data:`ENDING_WAIT` seconds is followed as any live worker."""
    ending = {worker for worker, (_text, _seen, beat) in pool.beats.items()
              if beat.get("ends_with") and not note_lives(beat["ends_with"])}
    if not ending:
        return
    logger.info("Waiting for %d worker(s) of an earlier run to end: their steering process is gone",
                len(ending))
    deadline = time.monotonic() + ENDING_WAIT
    while ending and time.monotonic() < deadline:
        time.sleep(0.05)
        beats = pool.queue.heartbeats()
        for worker in list(ending):
            beat = pool.beats[worker][2]
            if worker not in beats or not note_lives({"host": beat.get("host"), "pid": beat.get("pid")}):
                ending.discard(worker)
                del pool.beats[worker]
    if ending:
        logger.warning("%d worker(s) of an earlier run still run %.0f s after their steering process was found "
                       "gone: following them", len(ending), ENDING_WAIT)


class PooledSystem(WorkerJobs):
    """Units run by worker jobs of the batch system ``inner`` (:class:`WorkerJobs`): each unit followed as a job
    of its own."""

    pooled = True

    def __init__(self, run: Any, inner: BatchSystem) -> None:
        super().__init__(run, inner)
        self._pool_of: dict[int, tuple[UnitPool, str]] = {}  # id(unit) -> (pool, unit name)
        self._next_news = 0.0  # (a cluster's workers) when news() looks at their logs again

    def needs_job_script(self, job: Job) -> bool:
        return False  # a worker job runs the unit: its front-end writes no wrapper

    # --- following units ----------------------------------------------------------------------------

    def _journal(self, pool: UnitPool, name: str, job: Job) -> None:
        """Write the unit's journal (its queue and name there) before it enters the queue: a steering process
        killed right after the unit went in leaves a journal by which the next one finds it, not a second unit."""
        job.placement = {"queue": str(pool.queue.root), "unit": name}
        if job.journaled:
            job.files.record_submission(job.system, "", job.placement)
        job.journal_written = True

    def _track(self, pool: UnitPool, name: str, job: Job) -> None:
        pool.members[name] = job
        job.measured = None  # an earlier run's figures (a unit queued again) are not this run's
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
        _logs, stdout, stderr, exit_code, _setup_failed = files.wrapper_paths()
        logs = {} if self.run.config.unit_logs == "pilot" else {"stdout": stdout, "stderr": stderr}
        if _folderless(job):
            # no job folder: its input rides in the entry, its exit code and outcome in its worker's line (no
            # later steering process looks for its exit code's file), its logs are its worker's or made there
            unit = {**job.unit, "inline": base64.b64encode(job.inline[1]).decode("ascii")}  # type: ignore[index]
            return {"key": job.key, "name": job.name, "unit": unit, "files": logs}
        job.write_inline()
        files.make_folders()
        unit = job.unit
        if "job_files" in unit:  # arguments that are the unit's own files (a front-end's unit shared by its jobs)
            unit = {**{k: v for k, v in unit.items() if k != "job_files"},
                    "args": [*unit.get("args", ()), *(files.path_of(name) for name in unit["job_files"])]}
        # unit_logs pilot: no log files per unit, its part of its worker's logs
        return {"key": job.key, "name": job.name, "unit": unit, "files": {"exit_code": exit_code, **logs}}

    def watched(self) -> bool:
        return True

    def news(self) -> bool:
        """Whether a worker wrote to its log since the last poll: a unit that ended is seen within moments, not a
        poll pause later. Workers of this machine are looked at whenever the run asks (every few milliseconds);
        a cluster's, on its shared file system, at most :data:`REMOTE_NEWS_FILES_PER_SECOND` files a second."""
        pools = [pool for pool in self.pools.values() if pool.members]
        if not pools:
            return False
        if not self.inner.on_this_host:
            now = time.monotonic()
            if now < self._next_news:
                return False
            files = sum(1 + len(pool.carriers) for pool in pools)
            low, high = REMOTE_NEWS_EVERY
            self._next_news = now + min(high, max(low, files / REMOTE_NEWS_FILES_PER_SECOND))
        return any(pool.queue.has_news() for pool in pools)

    def states(self, jobs: Iterable[Job]) -> dict[Job, JobState]:
        changes: dict[Job, JobState] = {}
        ended = self._ended_carriers()
        for key, pool in list(self.pools.items()):
            self._follow(pool, changes, ended)
            if self._finished(pool):
                del self.pools[key]
        return changes

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

    def _take_done(self, pool: UnitPool, changes: dict[Job, JobState]) -> None:
        """What the workers' logs say since the last poll: units whose run started (running), was put back
        (waiting again: the worker's allocation ended) or ended (successful with exit code 0, else aborted; the
        run and front-end judge)."""
        lines = pool.queue.take_log()
        if pool.replay:  # ends of units followed after they ended (attach)
            lines, pool.replay = [*pool.replay, *lines], []
        # a unit that started and ended since the last poll (most short ones) is judged by its end alone: its
        # start would be a change to running that its end replaces in the same poll
        ends = {line.get("name"): number for number, line in enumerate(lines) if is_end(line)}
        for number, line in enumerate(lines):
            name = line.pop("name")
            job = pool.members.get(name)
            if job is None:
                if pool.earlier is not None and is_end(line):
                    pool.ended_before[name] = line  # a unit of an earlier steering process, not followed yet
                continue
            worker = line.get("worker") or pool.running.get(name, "")
            if "start" in line:
                pool.pending.discard(pool.queue.batch_of(name))
                if ends.get(name, -1) > number:
                    continue  # it ended since the last poll too
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
            if isinstance(line.get("usage"), dict):
                job.measured = line["usage"]
            if isinstance(line.get("exit_code"), int):
                job.files.known_exit_code(line["exit_code"])  # written to its file before this line
            if "result" in line:  # handed over by the unit instead of its result file
                job.files.known_result(line["result"])
            if "logs" in line:  # it wrote into its worker's logs, not into files of its own
                job.files.known_log_parts(line["logs"])
            by_files = status_of_files(job.files)  # a unit's end is its exit code alone
            changes[job] = JobState(JobStatus.aborted if by_files is None else by_files)

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

    def attach(self, job: Job, journal: dict[str, Any]) -> bool:
        """Follow a unit that a steering process before this one queued, if it is still queued, held by a live
        worker, or ended well since its front-end looked."""
        root, name = journal.get("queue"), journal.get("unit")
        if not root or not name or not Path(root, "todo").is_dir():
            return False
        pool = self._adopt(job, Path(root))
        waiting, holders = self._earlier(pool)
        ended = pool.ended_before.pop(name, None)
        if ended is not None:
            # its run ended since its front-end looked (the check and this call are not one step): ended well,
            # it is followed to that end, which the next poll reports (queued again, it would run twice); ended
            # badly, it goes again
            if ended.get("exit_code") != 0 or written_exit_code(job.files) != 0:
                return False
            self._track(pool, name, job)
            job.job_id = str(ended.get("job_id") or "")
            pool.replay.append({**ended, "name": name})
            return True
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
            _wait_for_ending(pool)
            queue = pool.queue
            # ``todo/`` is listed before the claims and after: a batch a live worker claims (todo -> claimed) or
            # puts back (claimed -> todo) between the listings is in one of them, never in neither (its units
            # would be queued again and run twice)
            waiting = queue.index_waiting()
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
            pool.earlier = (waiting | queue.index_waiting(), holders)
            # a unit held at neither listing but not waiting either ended before the listing of the holders:
            # its line is in the logs now
            pool.ended_before.update(queue.take_done())
        return pool.earlier

    def _adopt(self, job: Job, root: Path) -> UnitPool:
        """The pool at ``root`` of an earlier steering process, with its worker jobs that still run."""
        pool = self.pools.get(str(root))
        if pool is None:
            pool = self.pools[str(root)] = UnitPool(queue=WorkQueue(root), template=job)
            fresh = not root.exists()  # a queue no steering process had: nothing of an earlier one to take up
            pool.queue.create()
            if not fresh:
                pool.queue.stop_file.unlink(missing_ok=True)
                pool.queue.cancel_note.unlink(missing_ok=True)  # a cancel of an earlier run's work is not this run's
                pool.queue.drain(False)
            pool.steering_note = pool.queue.add_steering(
                f"{host_name()}-{os.getpid()}-{self.run.tag}",
                {"host": host_name(), "pid": os.getpid(), "started": process_started(os.getpid()),
                 "tag": self.run.tag})
            if not fresh:
                pool.ended_before = pool.queue.take_done()  # their exit codes are in their own files too
                pool.queue.forget_logs(alive={p.stem for p in pool.queue.workers.glob("*.json")})
                self._adopt_carriers(pool)
        return pool
