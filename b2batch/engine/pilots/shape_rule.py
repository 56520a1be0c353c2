"""How the run shapes the jobs of a kind of unit when ``job_shape`` is ``auto``: one job per unit, bundles of
units, or pilots, decided from what the run has seen of that kind.

A *kind* is a family of units (for luigi: a task family) on one batch system with one signature of the
settings that shape its jobs (:func:`~b2batch.engine.pilots.unit_pool.signature`): units with other resources,
containers or accounts are another kind, and never share a pilot or bundle. For each kind the run keeps a
moving estimate of how long a unit runs inside its job (its worker's own measure, or the time from the
job's start to its exit code: never the wait in the queue), from the last :data:`SAMPLES` units that ended.

:func:`decide` is the rule (``docs/job-shapes.md`` says it for users):

- fewer than :data:`MIN_READY` units ready and no pilot alive that would take them: one job per unit;
- nothing known yet, more ready: the units go to pilots, of which only :data:`PROBES` start; their first units
  are the probes. The kind is decided when a probe ends, or as soon as a probe has run :data:`TARGET_WALL`
  seconds (so long units are not held back until their probe ends: they pay at most that for it);
- a median under :data:`SHORT` seconds: pilots, as many as ``ready x median / TARGET_WALL`` (each pilot
  gets about that much of the backlog), at most the throttle; but when that would be one pilot per unit
  (the units are long against ``TARGET_WALL`` and fewer than the throttle), one job per unit instead;
- a median of :data:`LONG` seconds or more (minutes): one job per unit;
- between: one job per unit while the ready units fit in the throttle, else bundles of
  ``ceil(ready / throttle)`` units (never more than :data:`BUNDLE_WALL` seconds of work in one).

The throttle is ``max_jobs_in_flight``, the local system's slots, or :data:`DEFAULT_CAP` when none is set.

A front-end that hands over at most ``window`` units at a time and holds the rest back (joblib keeps ``n_jobs``
batches out) shows the rule only a window of its backlog. With ``window`` units ready the backlog is unknown: the
rule takes it as more than the throttle, and the ``window`` (the parallelism the caller asked for) as the
throttle. Fewer than :data:`MIN_READY` then do not mean a small kind; short and middle kinds get ``window``
pilots (at most the throttle), long ones a job per unit.
"""

from __future__ import annotations

import dataclasses
import math
from collections import deque
from dataclasses import dataclass, field

#: Units of a kind that run first, in pilots, to learn how long its units take.
PROBES = 2
#: A kind with fewer units ready than this, and nothing known of it, gets one job per unit: probing it would
#: cost about as many jobs as pilots could save.
MIN_READY = 8
#: Seconds of work a pilot should get of the backlog (also: how long a probe may run before the kind is
#: decided without waiting for it to end).
TARGET_WALL = 10.0
#: A median below this (seconds) makes a kind short: pilots.
SHORT = 60.0
#: A median of this many seconds or more makes a kind long: one job per unit.
LONG = 300.0
#: Most seconds of work in one bundle.
BUNDLE_WALL = 600.0
#: Most pilots or jobs in flight when no throttle is set.
DEFAULT_CAP = 100
#: Units of a kind the moving estimate remembers.
SAMPLES = 25

SHAPES = ("job_per_task", "bundles", "pilots")


@dataclass(frozen=True)
class Shape:
    """What a kind of units gets: ``kind`` (pilots, bundles or job_per_task), ``size`` (pilots wanted, or units
    per bundle; 1 for job_per_task) and ``why``, in words."""

    kind: str
    size: int
    why: str
    ready: int = 0
    probing: bool = False


@dataclass
class Estimate:
    """The moving estimate of one kind's run time per unit."""

    samples: deque[float] = field(default_factory=lambda: deque(maxlen=SAMPLES))
    seen: int = 0  # units that ended, in all
    _median: float | None = None  # of the samples, computed when asked after a change (asked per unit)
    _stale: bool = False

    def add(self, seconds: float) -> None:
        self.samples.append(max(0.0, seconds))
        self.seen += 1
        self._stale = True

    def median(self) -> float | None:
        if self._stale:  # (not statistics.median: importing statistics cost a Pool's map ~3 ms)
            ordered = sorted(self.samples)
            middle = len(ordered) // 2
            self._median = ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2
            self._stale = False
        return self._median


def _s(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s"


def decide(forced: str, median: float | None, running_for: float, ready: int, cap: int, pooled: int = 0,
           window: int = 0) -> Shape:
    """The shape of a kind: ``forced`` is ``auto`` or the one ``job_shape`` names; ``median`` the estimate
    (None: no unit ended yet), ``running_for`` the seconds the longest-running unit of the kind has run so far,
    ``ready`` its units that wait or run, ``cap`` the throttle, ``pooled`` its units in pilots now (or 1 when
    pilots that would take its units run for others), ``window`` the most units the front-end hands over at a
    time (0: it hands over all it has)."""
    seen, cap = max(1, ready), max(1, cap)
    if window and seen >= window:
        shape = _held_back(forced, median, running_for, seen, min(cap, window))
    else:
        shape = _decide(forced, median, running_for, seen, cap, pooled)
    return dataclasses.replace(shape, ready=ready)


def _said(median: float | None, running_for: float) -> str:
    if median is not None:
        return f"median {_s(median)} per task"
    return f"a probe has run {_s(running_for)} so far" if running_for else "no task ended yet"


def _held_back(forced: str, median: float | None, running_for: float, ready: int, cap: int) -> Shape:
    """The shape of a kind whose front-end holds units back (``ready`` is its whole window): its backlog is
    unknown, at least the throttle ``cap`` (the window, or less)."""
    said = f"{_said(median, running_for)}, {ready} handed over and more held back"
    per_unit = median if median is not None else running_for
    if forced == "job_per_task" or (forced == "auto" and per_unit >= LONG):
        return Shape("job_per_task", 1, f"job_shape {forced}" if forced != "auto" else f"{said}: long")
    if forced == "bundles":
        return _decide(forced, median, running_for, ready, cap, 0)
    if forced == "auto" and median is None and running_for < TARGET_WALL:
        return Shape("pilots", min(PROBES, cap), f"probing: {said}", probing=True)
    return Shape("pilots", cap, f"{'job_shape pilots; ' if forced == 'pilots' else ''}{said}: {cap} pilot(s)")


def _decide(forced: str, median: float | None, running_for: float, ready: int, cap: int, pooled: int) -> Shape:
    known = median is not None
    per_unit = median if median is not None else running_for
    said = _said(median, running_for)
    if forced == "pilots":
        size = min(cap, max(PROBES, math.ceil(ready * per_unit / TARGET_WALL))) if per_unit else min(cap, PROBES)
        return Shape("pilots", min(size, ready), f"job_shape pilots; {said}, {ready} ready")
    if forced == "bundles":
        size = max(2, min(ready, math.ceil(BUNDLE_WALL / max(per_unit, 1.0)))) if known else 10
        return Shape("bundles", size, f"job_shape bundles; {said}, up to {size} per job")
    if forced == "job_per_task":
        return Shape("job_per_task", 1, "job_shape job_per_task")
    if ready < MIN_READY and not pooled:
        return Shape("job_per_task", 1, f"{said}, only {ready} ready: pilots would save few jobs")
    if not known and running_for < TARGET_WALL:
        return Shape("pilots", min(PROBES, ready, cap), f"probing: {said}", probing=True)
    if per_unit >= LONG:
        return Shape("job_per_task", 1, f"{said}: long")
    if per_unit < SHORT:
        pilots = math.ceil(ready * per_unit / TARGET_WALL)
        if per_unit < TARGET_WALL or ready > cap:
            size = max(1, min(cap, pilots, ready))
            return Shape("pilots", size, f"{said}, {ready} ready: {size} pilot(s)")
        return Shape("job_per_task", 1, f"{said}, {ready} ready, within the throttle of {cap}")
    if ready <= cap:
        return Shape("job_per_task", 1, f"{said}, {ready} ready, within the throttle of {cap}")
    size = max(1, min(math.ceil(ready / cap), int(BUNDLE_WALL // per_unit)))
    if size <= 1:
        return Shape("job_per_task", 1, f"{said}, {ready} ready")
    return Shape("bundles", size, f"{said}, {ready} ready, throttle {cap}: {size} per job")
