"""The worker jobs of pilots and bundles as the steering process sees them: each written and submitted to the
inner batch system, followed by its heartbeats and its end, cancelled when no more work comes, and taken up
again from an earlier steering process. What becomes of the units a worker job held when it is gone is
:class:`~b2batch.engine.pilots.pooled_system.PooledSystem`'s, which builds on :class:`WorkerJobs`.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

from b2batch.engine.files import JobFiles
from b2batch.engine.job import Job
from b2batch.engine.processes import host_name, process_started
from b2batch.engine.outcome import JobOutcome, has_ended
from b2batch.engine.jobstate import JobState
from b2batch.engine.system import BatchSystem
from b2batch.engine.pilots.unit_pool import UnitPool
from b2batch.errors import B2BatchError

logger = logging.getLogger(__name__)

#: The longest idle pause of a worker on the steering host (its queue is a local folder); the local system wakes
#: an idle pilot at once when units come or the run closes (``BatchSystem.wake``).
LOCAL_IDLE_PAUSE = 0.05
#: How often the idle workers of one queue on a cluster's shared file system list it together, at most, and their
#: shortest and longest idle pause: two pilots look every 0.1 s, fifty or more every second.
REMOTE_QUEUE_LISTINGS_PER_SECOND = 50
REMOTE_IDLE_PAUSE = (0.1, 1.0)
#: Seconds between two looks, as a run closes, at whether its local pilots have ended.
CLOSE_STEP = 0.001


class WorkerJobs(BatchSystem):
    """The worker jobs of the pools of a pooled batch system, run by the batch system ``inner``."""

    kind = "worker"
    #: Seconds :meth:`close` gives running pilots to end by themselves before it cancels them.
    CLOSE_WAIT = 3.0

    def __init__(self, run: Any, inner: BatchSystem) -> None:
        super().__init__(run)
        self.inner = inner
        self.name = f"{inner.name}-{self.kind}s"  # type: ignore[misc]
        self.pools: dict[str, UnitPool] = {}
        self._closed = False
        #: What :meth:`_describe` said, by (worker, its job, job id): asked twice per unit, made once per worker.
        self._described: dict[tuple[str, int, str], tuple[str, str]] = {}

    def _carrier(self, pool: UnitPool, idle_timeout: float, workers: int = 1) -> Job:
        """A new worker job for ``pool``: its spec and wrapper written, not submitted; ``workers``: how many the
        pool will have with it (its idle pause on a cluster)."""
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
                          "unit_seconds": template.config["pilot_task_seconds"], "worker": key,
                          "idle_pause": self._idle_pause(workers)}
        if self.run.config.workers_end_with_steering:  # a run without --batch: its pilots end with it
            spec["worker"]["steering"] = {"host": host_name(), "pid": os.getpid(),
                                          "started": process_started(os.getpid())}
        files.write_spec(spec)
        files.write_wrapper(job_wrapper(template.name, key, template.config, files, [str(files.spec)]))
        files.reset()
        return carrier

    def _idle_pause(self, workers: int) -> float:
        """The longest idle pause of a worker among ``workers`` of one queue."""
        if self.inner.on_this_host:
            return LOCAL_IDLE_PAUSE
        low, high = REMOTE_IDLE_PAUSE
        return min(high, max(low, workers / REMOTE_QUEUE_LISTINGS_PER_SECOND))

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
        if carrier is not None and carrier.job_id:
            job_id = str(carrier.job_id)  # the batch system's own name for it
        elif not job_id:
            job_id = str(pool.beats.get(worker, ("", 0.0, {}))[2].get("job_id", "?"))
        key = (worker, id(carrier), str(job_id))
        said = self._described.get(key)
        if said is None:
            if len(self._described) > 10_000:
                self._described.clear()
            log = carrier.files.stderr if carrier is not None else ""
            said = self._described[key] = (str(job_id), f"{self.kind} job {job_id} on {self.inner.name}"
                                           + (f" (its log: {log})" if log else ""))
        return said

    def _ended_carriers(self) -> dict[str, JobState]:
        """The worker jobs of every pool that ended, by key: one status query for all of them, each answer
        going to the pool of its job (the inner system may answer for other jobs of it too)."""
        carriers = {carrier.key: carrier for pool in self.pools.values() for carrier in pool.carriers.values()}
        if not carriers:
            return {}
        answer = self.run.states(self.inner, list(carriers.values()),
                                 lambda job: carriers.get(job.key) is job)
        return {carrier.key: state for carrier, state in answer.items() if state.final}

    def _started(self, pool: UnitPool, worker: str) -> None:
        """A worker job was seen at work (a heartbeat or a claim)."""
        if worker not in pool.started:
            pool.started.add(worker)
            self.run.record.worker_job(worker, state="running", started_at=time.time())

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
            remove_tree(carrier.files.folder)  # a failed one keeps its files for a look

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

    def close(self) -> None:
        """No more work: worker jobs end. Queued ones are cancelled; running pilots are told to stop and, if
        they have not ended within :attr:`CLOSE_WAIT` seconds (at once when the run was interrupted), cancelled
        too: no allocation outlives its steering process. A bundle job holding units finishes them."""
        if self._closed:
            return
        self._closed = True
        for pool in self.pools.values():
            pool.queue.finish_all()
            started = [c for c in pool.carriers.values() if c.key in pool.started]
            # Pilots end their idle pause now: on a cluster too, where the scheduler can signal them (one command).
            if self.kind == "pilot" and not self.run.interrupted:
                self.inner.wake_to_end(started)
            elif self.inner.on_this_host:  # (elsewhere a wake costs a scheduler command: they are cancelled)
                self.inner.wake(started)
            # A bundle job whose units all ended has run and ends by itself; only pilots may wait for nothing.
            waiting = [c for c in pool.carriers.values()
                       if c.key not in pool.started and (self.kind == "pilot" or pool.members)]
            self._cancel_carriers(pool, waiting, "that wait")
        if self.kind == "pilot":
            deadline = time.monotonic() + (0.0 if self.run.interrupted else self.CLOSE_WAIT)
            step = CLOSE_STEP if self.inner.on_this_host else 0.01  # (woken, local pilots end within ms)
            while True:
                running = {key: pool for pool in self.pools.values() for key in pool.carriers
                           if key in pool.started and (pool.queue.workers / f"{key}.json").exists()}
                if not running or time.monotonic() >= deadline:
                    break
                time.sleep(step)
                step = step if self.inner.on_this_host else min(2 * step, 0.1)
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

    def _adopt_carriers(self, pool: UnitPool) -> None:
        """Follow the worker jobs of earlier steering processes that the inner batch system still has."""
        for folder in sorted({path.parent for name in ("submission.json", "submitting.json")
                              for path in pool.queue.root.glob(f"jobs/*/{name}")}):
            if has_ended(folder):
                remove_tree(folder)  # a worker job that ended: nothing to follow
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

    # --- what becomes of the units: PooledSystem's -----------------------------------------------

    def _take_done(self, pool: UnitPool, changes: dict[Job, JobState]) -> None:
        raise NotImplementedError

    def _lose(self, pool: UnitPool, worker: str, names: list[str], reason: str, changes: dict[Job, JobState]) -> None:
        raise NotImplementedError

    def _drop(self, pool: UnitPool, worker: str, names: list[str], reason: str, changes: dict[Job, JobState]) -> None:
        raise NotImplementedError

    def _give_up(self, pool: UnitPool, message: str, changes: dict[Job, JobState]) -> None:
        raise NotImplementedError


def remove_tree(root: Path) -> None:
    import shutil

    shutil.rmtree(root, ignore_errors=True)
