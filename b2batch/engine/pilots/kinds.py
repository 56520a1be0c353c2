"""The two kinds of pooled batch systems (:mod:`b2batch.engine.pilots.pooled_system`): pilots and bundles.

- :class:`PilotSystem` (setting ``pilot_jobs``): one queue per kind of unit, pulled by at most M pilot jobs
  that end when idle and are submitted again when work comes.
- :class:`BundleSystem` (setting ``tasks_per_job``): up to K units that are ready together get a queue of their
  own and one worker job, which ends when that queue is empty.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from b2batch.engine.job import Job
from b2batch.engine.pilots.pooled_system import PooledSystem, logger
from b2batch.engine.pilots.unit_pool import UnitPool, signature, unit_name
from b2batch.engine.pilots.worker_jobs import remove_tree
from b2batch.engine.jobstate import JobState, JobStatus
from b2batch.engine.system import BatchSystem
from b2batch.engine.pilots.work_queue import WorkQueue
from b2batch.errors import B2BatchError, TransientCommandError


def _pool_root(run: Any, job: Job, kind: str, name: str) -> Path:
    """The folder of a pool's work queue, under the unit's task_file_dir (relative: to the run's base folder)."""
    return _resolved(str(job.config["task_file_dir"]), run.config.base_dir or Path.cwd()) / f"_{kind}s" / name


@functools.lru_cache(maxsize=64)
def _resolved(folder: str, base: Path) -> Path:
    path = Path(os.path.expanduser(folder))
    return path if path.is_absolute() else base / path


class PilotSystem(PooledSystem):
    """Units pulled from one queue per kind by at most ``pilot_jobs`` pilot jobs.

    Pilots of one run never keep each other waiting: when a queue has work and a pilot for it that the batch
    system has not started after :attr:`GIVE_BACK_AFTER` seconds (e.g. every ``local_slots`` slot is taken),
    the idle pilots of the run's other queues (those with nothing left to claim) end as soon as they find
    nothing to claim, giving their slots back, rather than after ``pilot_idle_timeout``."""

    kind = "pilot"
    #: Seconds a pilot with work waiting for it may stay queued before idle pilots of other queues end.
    GIVE_BACK_AFTER = 1.0
    #: Seconds a unit may wait in the steering process for others to share its batch, while pilots have work.
    STAGE_WAIT = 0.05

    def __init__(self, run: Any, inner: BatchSystem, size: Callable[[UnitPool], int] | None = None) -> None:
        super().__init__(run, inner)
        self._roots: dict[tuple[Any, int], Path] = {}  # the queue of units with the same settings
        #: How many pilots a queue wants (None: the setting pilot_jobs of its units; the run's job shaping
        #: gives its own, :mod:`b2batch.engine.pilots.shaping_system`).
        self.size = size

    def wanted(self, pool: UnitPool) -> int:
        """Pilots wanted for ``pool``."""
        return self.size(pool) if self.size is not None else pool.template.config["pilot_jobs"]

    def take_back(self, job: Job) -> bool:
        """Take a unit out of its queue if no pilot has claimed it yet; whether it was taken back."""
        found = self._pool_of.get(id(job))
        if found is None or found[1] in found[0].running or not self._take_back_many(found[0], [found[1]]):
            return False
        self._untrack(job)
        return True

    @staticmethod
    def _queue_key(job: Job) -> tuple[Any, int]:
        """Units with the same key (settings and bootstrap) share a queue."""
        return job.settings_key, id(job.bootstrap)

    def _pool(self, job: Job) -> UnitPool:
        key = self._queue_key(job)
        root = self._roots.get(key) if job.settings_key is not None else None
        if root is None:
            root = _pool_root(self.run, job, self.kind, f"{self.inner.name}-{signature(job, self.inner)}")
            if job.settings_key is not None:
                self._roots[key] = root
        return self._adopt(job, root)

    def states(self, jobs: Iterable[Job]) -> dict[Job, JobState]:
        changes = super().states(jobs)
        now = time.monotonic()
        for pool in self.pools.values():
            self._flush(pool, now)
        self._give_back_slots()
        for pool in self.pools.values():
            # Drained: nothing waits or runs, or nothing waits and no more pilots are wanted (a shaped kind
            # that goes to jobs of its own now): pilots that find nothing to claim end within 2 s.
            # Pilots started ahead (warm) wait for the queue's first units.
            self._drain(pool, not pool.warm and (not pool.members or (
                self.size is not None and not pool.waiting() and self.wanted(pool) <= 0)))
        return changes

    @staticmethod
    def _drain(pool: UnitPool, drained: bool) -> None:
        """Tell the pilots whether anything waits or runs in their queue: with nothing, they end within
        ``DRAIN_GRACE`` seconds of finding nothing to claim, not after ``pilot_idle_timeout``."""
        if drained != pool.drained:
            pool.queue.drain(drained)
            pool.drained = drained

    def _give_back_slots(self) -> None:
        """Ask the idle pilots of other queues to end while a queue's work waits for a pilot not yet started."""
        now = time.monotonic()
        starving = [pool for pool in self.pools.values() if pool.waiting() > 0 and any(
            key not in pool.started and now - pool.queued_at.get(key, now) >= self.GIVE_BACK_AFTER
            for key in pool.carriers)]
        if not starving:
            return
        for pool in self.pools.values():
            if pool in starving or pool.waiting() > 0:
                continue  # its idle pilots take its own work
            busy = set(pool.running.values())
            for key in [k for k in pool.carriers if k in pool.started and k not in busy and k not in pool.finishing]:
                pool.queue.finish_worker(key)
                pool.finishing.add(key)
                logger.info("%s: idle, ending it to free its slot for the %s job that waits for one",
                            self._describe(pool, key)[1], self.kind)

    def groups(self, jobs: list[Job]) -> list[list[Job]]:
        """Units of one queue (the same settings and bootstrap) go in as one group: one flush of the queue and one
        look at its pilots per group, not per unit. Units whose settings are looked up each (no settings key)
        go one by one."""
        by_queue: dict[tuple[Any, int], list[Job]] = {}
        groups: list[list[Job]] = []
        for job in jobs:
            if job.settings_key is None:
                groups.append([job])
            else:
                key = self._queue_key(job)
                if key not in by_queue:
                    by_queue[key] = []
                    groups.append(by_queue[key])
                by_queue[key].append(job)
        return groups

    def submit(self, group: list[Job]) -> None:
        """Queue the units of ``group``, each unit's journal written before it enters the queue. Units are
        gathered per pool and go into the queue in batches (:meth:`_flush`). Every unit's pool and entry are
        made first: a unit that cannot go fails the group before any of it went in."""
        made = []
        for job in group:
            pool = self._pool(job)
            if pool.given_up:
                raise B2BatchError(pool.given_up)
            made.append((job, pool, self._entry(job)))
        touched: dict[int, UnitPool] = {}
        for job, pool, entry in made:
            pool.warm = False
            self._drain(pool, False)  # before the unit: a pilot that sees it must not end
            name = unit_name(job, self.run.next_number())
            self._journal(pool, name, job)
            self._track(pool, name, job)
            job.job_id = ""
            job.carrier = ""
            if not pool.staged:
                pool.staged_since = time.monotonic()
            pool.staged.append((name, entry))
            touched[id(pool)] = pool
        now = time.monotonic()
        for pool in touched.values():
            self._flush(pool, now)
            self._top_up(pool, {})

    def _flush(self, pool: UnitPool, now: float) -> None:
        """Put the gathered units into the queue, in batches (:meth:`UnitPool.batch_size`), when fewer batches
        wait for the pilots than pilots are wanted (none starves), when a batch is full, or when the first has
        waited :data:`STAGE_WAIT` seconds; otherwise they wait for more to join them."""
        if not pool.staged:
            return
        wanted = max(1, self.wanted(pool))
        if len(pool.pending) >= wanted and len(pool.staged) < pool.target_batch() \
                and now - pool.staged_since < self.STAGE_WAIT:
            return
        staged, pool.staged = pool.staged, []
        size = pool.batch_size(len(staged), wanted)
        idle = not pool.pending  # its pilots may be in their idle pause
        for start in range(0, len(staged), size):
            units = staged[start:start + size]
            batch = units[0][0] if len(units) == 1 else f"{units[0][0]}+{len(units)}"
            pool.queue.put_batch(batch, units)
            pool.pending.add(batch)
        if idle:  # (a pilot not seen at work yet may be in its pause too: one started ahead, say)
            self.inner.wake(list(pool.carriers.values()))

    def warm(self, template: Job, count: int | None = None) -> None:
        """Start ``count`` pilots (default: the setting ``pilot_jobs``) for the queue of units like ``template``
        before any comes, where a pilot costs no allocation (jobs on this host). They wait in their idle pause,
        the queue not drained (:attr:`UnitPool.warm`), until its first units come or the run ends; pilots that
        cannot be submitted now are left for those units to ask for again."""
        if not self.inner.on_this_host or self.run.interrupted:
            return
        pool = self._pool(template)
        wanted = (template.config["pilot_jobs"] if count is None else count) - len(pool.carriers)
        if wanted <= 0 or pool.given_up or pool.members:
            return
        try:  # (ahead of any work: a failure here fails nothing, the units ask again)
            carriers = [self._carrier(pool, template.config["pilot_idle_timeout"], len(pool.carriers) + wanted)
                        for _ in range(wanted)]
            self._submit_carriers({carrier.key: pool for carrier in carriers}, carriers)
        except (B2BatchError, OSError) as e:
            logger.warning("%s: the pilot jobs for %s were not started ahead (%s); they start when its units come",
                           self.inner.name, template.family, e)
            return
        pool.warm = True

    def _top_up(self, pool: UnitPool, changes: dict[Job, JobState]) -> None:
        now = time.monotonic()
        if pool.given_up or now < pool.next_submit or self.run.interrupted:
            return
        # A pilot whose allocation ends within about one more unit is replaced now, while it runs its last.
        retiring = {w for w, (_text, _seen, beat) in pool.beats.items() if beat.get("retiring")}
        alive = (len([k for k in pool.carriers if k not in retiring])
                 + len([w for w in pool.beats if w not in pool.carriers and w not in retiring]))
        queued = sum(1 for key in pool.carriers if key not in pool.started)  # each will take a waiting unit
        wanted = min(self.wanted(pool) - alive, pool.waiting() - queued)
        if wanted <= 0:
            return
        try:
            carriers = [self._carrier(pool, pool.template.config["pilot_idle_timeout"],
                                      max(alive + wanted, self.wanted(pool))) for _ in range(wanted)]
            self._submit_carriers({carrier.key: pool for carrier in carriers}, carriers)
        except TransientCommandError as e:
            pool.failing_since = pool.failing_since or now
            limit = pool.template.config["scheduler_unreachable_timeout"]
            if now - pool.failing_since > limit:
                self._give_up(pool, f"{e}\nThe batch system kept failing for {limit:g} s (setting "
                                    f"scheduler_unreachable_timeout); no pilot job was submitted.", changes)
                return
            pool.submit_attempts += 1
            pool.next_submit = now + min(60.0, 2.0 ** (pool.submit_attempts - 1))
            logger.warning("%s; submitting pilot jobs again later", e)
            return
        except B2BatchError as e:
            # Each waiting unit fails with this; its own name comes first ("Task X could not be submitted ...").
            self._give_up(pool, f"{self.inner.name} did not take the pilot job that would run it: {e}", changes)
            return
        pool.failing_since = None
        pool.submit_attempts = 0


class BundleSystem(PooledSystem):
    """Up to ``tasks_per_job`` units that are ready together, run one after another in one job."""

    kind = "bundle"

    def __init__(self, run: Any, inner: BatchSystem, size: Callable[[Job], int] | None = None) -> None:
        super().__init__(run, inner)
        #: Units per bundle (None: the setting tasks_per_job of each unit; the run's job shaping gives its own).
        self.size = size

    def _size(self, job: Job) -> int:
        return max(1, self.size(job) if self.size is not None else job.config["tasks_per_job"])

    def groups(self, jobs: list[Job]) -> list[list[Job]]:
        """Units that may share jobs (the same settings, size and bundle key, in the order they came), in
        groups whose bundles go to the inner system as one array."""
        by_kind: dict[str, list[Job]] = {}
        for job in jobs:
            by_kind.setdefault(f"{signature(job, self.inner)}-{self._size(job)}-{job.bundle}", []).append(job)
        groups = []
        for members in by_kind.values():
            size = self._size(members[0]) * max(1, members[0].config["max_array_size"])
            groups += [members[i:i + size] for i in range(0, len(members), size)]
        return groups

    def submit(self, group: list[Job]) -> None:
        size = self._size(group[0])
        bundles: list[tuple[UnitPool, Job, list[tuple[str, Job]]]] = []
        try:
            for start in range(0, len(group), size):
                members = [(unit_name(job, self.run.next_number()), job) for job in group[start:start + size]]
                root = _pool_root(self.run, group[start], self.kind, f"{self.run.tag}-{os.getpid()}-{self.run.next_number()}")
                pool = UnitPool(queue=WorkQueue(root), template=group[start])
                pool.queue.create()
                units = []
                for name, job in members:
                    units.append((name, self._entry(job)))
                    self._journal(pool, name, job)
                pool.queue.put_batch(members[0][0], units)
                bundles.append((pool, self._carrier(pool, 0.0), members))
            self._submit_carriers({carrier.key: pool for pool, carrier, _members in bundles},
                                  [carrier for _pool, carrier, _members in bundles])
        except B2BatchError:
            for pool, _carrier, _members in bundles:
                if not pool.carriers:
                    remove_tree(pool.queue.root)
            raise
        for pool, carrier, members in bundles:
            self.pools[str(pool.queue.root)] = pool
            for name, job in members:
                self._track(pool, name, job)
                job.job_id = str(carrier.job_id)
                job.carrier = f"bundle job {carrier.job_id} on {self.inner.name} (its log: {carrier.files.stderr})"

    def _carrier_ended(self, pool: UnitPool, carrier: Job, state: JobState, changes: dict[Job, JobState]) -> None:
        self._take_done(pool, changes)
        super()._carrier_ended(pool, carrier, state, changes)
        # Units the bundle job did not get to (its allocation ended): submitted again by the run.
        reason = f"its bundle job {carrier.job_id} on {self.inner.name} ended before it ran"
        cancelled = pool.cancelled or pool.queue.cancel_reason()
        pool.queue.take_back_many(list(pool.members))
        for job in list(pool.members.values()):
            self._untrack(job)
            changes[job] = (JobState(JobStatus.aborted, f"its bundle job {carrier.job_id} was {cancelled}")
                            if cancelled else JobState(JobStatus.aborted, reason, scheduler_side=reason))

    def _finished(self, pool: UnitPool) -> bool:
        if pool.carriers or pool.members:
            return False
        remove_tree(pool.queue.root)
        return True

