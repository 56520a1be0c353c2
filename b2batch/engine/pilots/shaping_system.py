""":class:`ShapingSystem`: a batch system whose units the run shapes itself (``job_shape`` auto, or pilots or
bundles sized by the run): each kind of unit goes, as :func:`b2batch.engine.pilots.shape_rule.decide` says, to one job
per unit of the real batch system (the *inner* one), to bundles, or to pilots of it.

The run knows it by the inner system's name (its units show as ``slurm`` jobs in progress and summaries).
Units of a kind not known yet go to its pilot queue, where at first only the probes' pilots pull them; once
the kind is decided otherwise, the units no pilot has claimed are taken back and go out again at the next
poll (:meth:`Run.requeue`), to their own jobs or to bundles. Each kind's shape, why, and how many units went
where, are in the run's record (``RunRecord.shapes``) for the summary and the report.
"""

from __future__ import annotations

import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from b2batch.engine.job import Job
from b2batch.engine.outcome import ended_at
from b2batch.engine.pilots.kinds import BundleSystem, PilotSystem
from b2batch.engine.pilots.unit_pool import UnitPool, signature
from b2batch.engine.pilots.shape_rule import DEFAULT_CAP, PROBES, Estimate, Shape, decide
from b2batch.engine.jobstate import JobState, JobStatus
from b2batch.engine.system import BatchSystem

logger = logging.getLogger(__name__)


@dataclass(eq=False)
class Kind:
    """One family of units with one job signature on this batch system."""

    family: str
    signature: str
    forced: str  # the units' job_shape: auto, or the shape they ask for
    estimate: Estimate = field(default_factory=Estimate)
    shape: Shape | None = None
    noted: Shape | None = None  # the shape the record shows
    live: dict[int, Job] = field(default_factory=dict)  # units submitted and not ended, by id()
    in_pilots: dict[int, Job] = field(default_factory=dict)  # those of them in its pilot queue
    routed: Counter[str] = field(default_factory=Counter)  # units sent to each shape, in all


def _nothing_held() -> int:
    return 0


@dataclass(frozen=True)
class Feed:
    """How a front-end hands its units over: at most ``window`` at a time (0: all it has, as a luigi run does),
    and ``held()``, the units it holds back now (a joblib call packing calls into units, or waiting for its
    probes). Both go into :func:`~b2batch.engine.pilots.shape_rule.decide`: ``held()`` counts as ready."""

    window: int = 0
    held: Callable[[], int] = _nothing_held


class ShapingSystem(BatchSystem):
    """Units of the batch system ``inner``, each kind in the shape its units' setting ``job_shape`` asks for
    (``auto``: the shape the run decides; ``pilots`` or ``bundles``: sized by the run; ``job_per_task``)."""

    pooled = False  # a unit may get its own job: the front-end writes its wrapper

    def __init__(self, run: Any, inner: BatchSystem, feed: Feed | None = None) -> None:
        super().__init__(run)
        self.inner = inner
        self.feed = feed or Feed()
        self.name = inner.name  # type: ignore[misc]
        self.job_settings = inner.job_settings  # type: ignore[misc]
        self.pilots = PilotSystem(run, inner, size=self._pilots_for)
        self.bundles = BundleSystem(run, inner, size=self._bundle_size)
        self._kinds: dict[Any, Kind] = {}
        self._kind_of: dict[int, Kind] = {}  # id(unit) -> its kind
        self._route: dict[int, BatchSystem] = {}  # id(unit) -> where it went
        self._planned: dict[int, BatchSystem] = {}  # id(unit) -> where groups() sends it
        self._own: dict[int, Job] = {}  # units in jobs of their own, by id()
        self._started: dict[int, float] = {}  # id(unit) -> wall time it was first seen running
        self._pool_signatures: dict[int, str] = {}

    # --- kinds and their shapes -----------------------------------------------------------------------

    def _kind(self, job: Job, remember: bool = True) -> Kind:
        """The kind of ``job`` (remembered for a unit the system takes: it is forgotten when it ends)."""
        kind = self._kind_of.get(id(job))
        if kind is not None:
            return kind
        cache = (job.settings_key, id(job.bootstrap), job.family) if job.settings_key is not None else None
        kind = self._kinds.get(cache) if cache is not None else None
        if kind is None:
            sig, forced = signature(job, self.inner), str(job.config["job_shape"] or "auto")
            kind = self._kinds.setdefault((sig, job.family, forced), Kind(job.family, sig, forced))
            if cache is not None:
                self._kinds[cache] = kind
        if remember:
            self._kind_of[id(job)] = kind
        return kind

    def capacity(self) -> int:
        """The throttle: max_jobs_in_flight, else the inner system's own capacity, else DEFAULT_CAP."""
        return self.run.config.max_jobs_in_flight or self.inner.capacity() or DEFAULT_CAP

    def _rule(self, kind: Kind, extra: int) -> Shape:
        """The shape the rule gives ``kind`` with ``extra`` more units ready than it has live."""
        median = kind.estimate.median()
        running = 0.0
        if median is None:  # the rule looks at the probes only while no unit of the kind has ended
            # How long a probe has run: units in pilots only. A unit in a job of its own is "running" from the
            # scheduler's word on, which includes the job's start-up and the scheduler's lag in noticing its end
            # (seconds on SGE for a trivial call), not the unit's own run time.
            now = time.time()
            running = max((now - self._started[i] for i in kind.in_pilots if i in self._started), default=0.0)
        return decide(kind.forced, median, running, len(kind.live) + extra + self.feed.held(), self.capacity(),
                      self._pooled(kind), self.feed.window)

    def _decide(self, kind: Kind, extra: int = 0) -> Shape:
        shape = self._rule(kind, extra)
        if kind.shape is None or (shape.kind, shape.size) != (kind.shape.kind, kind.shape.size):
            logger.info("%s on %s: %s (%s)", kind.family, self.name, shape.kind, shape.why)
        kind.shape = shape
        self._note(kind)
        return shape

    def _pooled(self, kind: Kind) -> int:
        """The kind's units in pilots, or 1 when none is but pilots that take its units are alive (those of
        another family with the same job settings: a unit sent there costs no job)."""
        if kind.in_pilots:
            return len(kind.in_pilots)
        for pool in self.pilots.pools.values():
            if (pool.carriers or pool.beats) and self._pool_signature(pool) == kind.signature:
                return 1
        return 0

    def _pool_signature(self, pool: UnitPool) -> str:
        sig = self._pool_signatures.get(id(pool))
        if sig is None:
            sig = self._pool_signatures[id(pool)] = signature(pool.template, self.inner)
        return sig

    def _note(self, kind: Kind) -> None:
        """The kind's shape in the run's record, for the summary and the report: the shape it got with the most
        units ready (the latest, when the shape changed); one entry per family, whose units are counted over
        all its kinds and whose shape is that of its kind with most units."""
        shape = kind.shape
        if shape is None or kind.forced == "job_per_task":
            return  # as chosen (job_shape or an explicit pilot_jobs or tasks_per_job): nothing to say
        if kind.noted is None or kind.noted.probing or shape.kind != kind.noted.kind or (
                not shape.probing and shape.ready >= kind.noted.ready):
            kind.noted = shape
        family = [k for k in {id(k): k for k in self._kinds.values()}.values() if k.family == kind.family]
        kind = max(family, key=lambda k: (sum(k.routed.values()), k is kind))
        if kind.noted is None:
            return
        units: Counter[str] = Counter()
        for other in family:
            units.update(other.routed)
        shape = kind.noted
        self.run.record.shapes[kind.family] = {
            "system": self.name, "shape": shape.kind, "size": shape.size, "why": shape.why, "ready": shape.ready,
            "median_seconds": kind.estimate.median(), "ended": kind.estimate.seen, "kinds": len(family),
            "units": {k: n for k, n in units.items() if n}}

    def _pilots_for(self, pool: UnitPool) -> int:
        """Pilots wanted for a pilot queue: those its kinds' shapes ask for."""
        sig = self._pool_signature(pool)
        wanted = sum(kind.shape.size for kind in {id(k): k for k in self._kinds.values()}.values()
                     if kind.signature == sig and kind.in_pilots and kind.shape is not None
                     and kind.shape.kind == "pilots")
        return min(wanted, self.capacity())

    def _bundle_size(self, job: Job) -> int:
        shape = self._kind(job).shape
        return shape.size if shape is not None and shape.kind == "bundles" else 1

    # --- the run's calls ----------------------------------------------------------------------------

    def takes_now(self, waiting: Sequence[Job]) -> list[Job]:
        # Units the rule would send to pilots now gain nothing by waiting for more: the pilots are submitted on
        # the first of them and take units from the queue while the rest is handed out. The jobs of other kinds
        # wait for their arrays or bundles. Kinds are counted as groups() counts them, and not remembered (a job
        # that waits may be dropped before it is submitted, and its id reused).
        by_kind: dict[int, tuple[Kind, list[Job]]] = {}
        for job in waiting:
            kind = self._kind(job, remember=False)
            by_kind.setdefault(id(kind), (kind, []))[1].append(job)
        return [job for kind, members in by_kind.values() if self._rule(kind, len(members)).kind == "pilots"
                for job in members if job.unit is not None]

    def groups(self, jobs: list[Job]) -> list[list[Job]]:
        by_kind: dict[int, list[Job]] = {}
        for job in jobs:
            by_kind.setdefault(id(self._kind(job)), []).append(job)
        to: dict[int, list[Job]] = {id(self.pilots): [], id(self.bundles): [], id(self.inner): []}
        for members in by_kind.values():
            kind = self._kind(members[0])
            shape = self._decide(kind, extra=len(members))
            target: BatchSystem = {"pilots": self.pilots, "bundles": self.bundles}.get(shape.kind, self.inner)
            for job in members:
                where = target if job.unit is not None else self.inner
                self._planned[id(job)] = where
                to[id(where)].append(job)
        groups = []
        for system in (self.pilots, self.bundles, self.inner):
            if to[id(system)]:
                groups += system.groups(to[id(system)])
        return groups

    #: A unit routed to a job of its own whose front-end wrote no wrapper for it (the calls executor, so that
    #: calls in pilots cost none) gets its spec and wrapper here, from the run's job-script maker.
    writes_job_scripts = True

    def submit(self, group: list[Job]) -> None:
        target = self._planned.get(id(group[0]), self.inner)
        if target is self.inner:
            for job in group:
                job.placement = {}  # not a pilot's unit (any more): a later run must not look for it in a queue
                self._write_job_script(job)
        kinds: dict[int, Kind] = {}
        for job in group:  # first: the pilots' first top-up asks how many this kind wants
            kind = self._follow(job, target, note=False)
            kinds[id(kind)] = kind
        for kind in kinds.values():
            self._note(kind)
        try:
            target.submit(group)
        except Exception:
            for job in group:
                kind = self._kind(job)
                self._untrack(job)
                kind.routed[self._shape_name(target)] -= 1
            raise
        for job in group:
            self._planned.pop(id(job), None)

    def warm(self, template: Job) -> None:
        """Pilots for units like ``template`` before they come, as many as their probes get
        (:data:`~b2batch.engine.pilots.shape_rule.PROBES`, at most the throttle), where a pilot costs no
        allocation (jobs on this host); none when their ``job_shape`` asks for jobs of their own or bundles.
        The rule shapes the units when they come, these pilots counting as alive for them."""
        if self.inner.on_this_host and str(template.config["job_shape"] or "auto") in ("auto", "pilots"):
            self.pilots.warm(template, min(PROBES, self.capacity()))

    def _write_job_script(self, job: Job) -> None:
        """The spec (its bootstrap and unit) and wrapper of a unit that goes to a job of its own, if its front-end
        wrote none."""
        job.write_inline()  # its input file, if it was kept in memory for a pilot's entry
        job_wrapper = self.run.config.job_wrapper
        if job.unit is None or job_wrapper is None or os.path.exists(job.files.path_of("wrapper")):
            return
        job.files.write_spec({**(job.bootstrap or {}), "unit": job.unit})
        job.files.write_wrapper(job_wrapper(job.name, job.key, job.config, job.files, [job.files.path_of("spec")]))

    def _follow(self, job: Job, target: BatchSystem, note: bool = True) -> Kind:
        """Track ``job`` as gone to ``target``; its kind (whose shape goes into the record, unless ``note`` is
        False: the caller notes each kind of a group once)."""
        kind = self._kind(job)
        kind.live[id(job)] = job
        self._route[id(job)] = target
        kind.routed[self._shape_name(target)] += 1
        if target is self.pilots:
            kind.in_pilots[id(job)] = job
        elif target is self.inner:
            self._own[id(job)] = job
        if note:
            self._note(kind)
        return kind

    def _shape_name(self, target: BatchSystem) -> str:
        return {id(self.pilots): "pilots", id(self.bundles): "bundles"}.get(id(target), "job_per_task")

    def watched(self) -> bool:
        return self.inner.watched() or self.pilots.watched()

    def news(self) -> bool:
        """News of its pilots or bundles, or of the inner system (a unit's job of its own, a worker job that
        ended)."""
        return self.pilots.news() or self.bundles.news() or self.inner.news()

    def states(self, jobs: Iterable[Job]) -> dict[Job, JobState]:
        changes: dict[Job, JobState] = {}
        if self.pilots.pools:
            changes.update(self.pilots.states(()))
        if self.bundles.pools:
            changes.update(self.bundles.states(()))
        if self._own:
            changes.update(self.run.states(self.inner, list(self._own.values()), lambda job: id(job) in self._own))
        now = time.time()
        for job, state in changes.items():
            if state.status == JobStatus.running:
                self._started.setdefault(id(job), now)
            elif state.final:
                self._ended(job, now)
        self._reshape()
        return changes

    def _ended(self, job: Job, now: float) -> None:
        """Learn from a unit that ended how long its kind's units run (inside the job, not in the queue)."""
        kind = self._kind_of.get(id(job))
        if kind is None:
            return
        seconds = None
        if job.ran is not None:
            seconds = job.ran[1] - job.ran[0]
        elif id(job) in self._started:
            end = ended_at(job.files) or now
            seconds = end - self._started[id(job)]
        if seconds is not None:
            kind.estimate.add(seconds)

    def _reshape(self) -> None:
        """Decide again the kinds that have units in pilots; units of those no longer shaped as pilots that no
        pilot has claimed yet go out again at the next poll, in their new shape."""
        for kind in {id(k): k for k in self._kinds.values()}.values():
            if not kind.in_pilots:
                continue
            shape = self._decide(kind)
            if shape.kind == "pilots" or self.run.interrupted:
                continue
            taken = [job for job in list(kind.in_pilots.values()) if self.pilots.take_back(job)]
            for job in taken:
                self._untrack(job)
                kind.routed["pilots"] -= 1
                self.run.requeue(job)
            if taken:
                logger.info("%s on %s: %d task(s) that waited for a pilot go to %s instead", kind.family, self.name,
                            len(taken), shape.kind)

    def _untrack(self, job: Job) -> None:
        kind = self._kind_of.pop(id(job), None)
        if kind is not None:
            kind.live.pop(id(job), None)
            kind.in_pilots.pop(id(job), None)
        self._route.pop(id(job), None)
        self._own.pop(id(job), None)
        self._started.pop(id(job), None)
        self._planned.pop(id(job), None)

    def cancel(self, jobs: list[Job]) -> None:
        by: dict[int, tuple[BatchSystem, list[Job]]] = {}
        for job in jobs:
            target = self._route.get(id(job), self.inner)
            by.setdefault(id(target), (target, []))[1].append(job)
        for target, chosen in by.values():
            target.cancel(chosen)
        if self.run.interrupted:
            self.close()

    def forget(self, job: Job) -> None:
        self._route.get(id(job), self.inner).forget(job)
        self._untrack(job)

    def attach(self, job: Job, journal: dict[str, Any]) -> bool:
        """Follow a unit an earlier steering process queued: in its pilot or bundle queue, or its own job."""
        queue = str(journal.get("queue") or "")
        if queue:
            target: BatchSystem = self.pilots if "/_pilots/" in queue.replace("\\", "/") else self.bundles
        else:
            target = self.inner
        if not target.attach(job, journal):
            return False
        self._follow(job, target)
        return True

    def recall(self, job_id: str, journal: dict[str, Any]) -> None:
        recall = getattr(self.inner, "recall", None)
        if recall is not None:
            recall(job_id, journal)

    def close(self) -> None:
        self.pilots.close()
        self.bundles.close()
        self.inner.close()

