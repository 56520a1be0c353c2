""":class:`PackSizer`: how many short calls go into one unit, from the calls' run times measured in the jobs.

A unit (a job, or a unit in a pilot) costs a fixed amount whatever it runs: a fork or a job, a few small files,
a round trip through the steering loop. Calls of a few microseconds, one per unit, pay that cost thousands of
times over; packed by the thousand they pay it once. So, as joblib's and dask's automatic batching do, the
front-end packs calls into units of about :data:`TARGET_SECONDS` of work:

- until a unit has been timed, packs of one call (the *probes*; a caller sends at most :data:`PROBES` of them
  and waits for a first time, or until a probe has run :data:`PROBE_PATIENCE` seconds: long calls then go out
  one per unit without waiting for their probe to end);
- then packs of ``TARGET_SECONDS / seconds per call`` calls (a moving estimate over the packs that ended),
  growing at most :data:`GROWTH` times from one pack to the next, so that one misleading first time does not
  make one giant unit; at most :data:`MAX_PACK` calls, and at most the caller's share (``spread``: the calls
  waiting divided by the units that could run at once), so that one pack never holds what a second pilot or
  slot could run beside it;
- calls that take ``TARGET_SECONDS`` or more stay one per unit.

An explicit size (a ``chunksize``, a ``batch_size``) makes the sizer fixed: it answers that size, always.
"""

from __future__ import annotations

import math
import threading

#: Seconds of work a pack is filled up to: a unit's fixed cost (a few milliseconds in a pilot) is about 1%.
TARGET_SECONDS = 0.3
#: Packs that go out before the first one has been timed.
PROBES = 2
#: Seconds a probe may run before its call counts as long (packs of one) without waiting for its end.
PROBE_PATIENCE = 5.0
#: The most a pack may grow from one pack to the next.
GROWTH = 8
#: Most calls in one pack.
MAX_PACK = 10_000
#: Weight of the newest pack's time in the moving estimate of seconds per call.
NEWEST_WEIGHT = 0.3


class PackSizer:
    """The size of the next pack of calls (``fixed``: always that size)."""

    def __init__(self, fixed: int | None = None, target: float = TARGET_SECONDS, limit: int = MAX_PACK) -> None:
        if fixed is not None and fixed < 1:
            raise ValueError(f"a pack holds at least one call, not {fixed}")
        self.fixed = fixed
        self.target = target
        self.limit = limit
        #: Seconds per call as timed in the jobs (None until a pack ended or a probe ran long).
        self.per_call: float | None = None
        #: The largest pack handed out so far.
        self.largest = 0
        self._guessed = False  # per_call is a probe's time so far (it may count a job's start-up), not a measure
        self._lock = threading.Lock()

    @property
    def probing(self) -> bool:
        """Whether no call has been timed yet (packs of one, at most PROBES of them out)."""
        return self.fixed is None and self.per_call is None

    def next_size(self, waiting: int | None = None, spread: int = 1) -> int:
        """The size of the next pack: ``waiting`` calls wait now (None: not known), ``spread`` units may run at
        once."""
        if self.fixed is not None:
            return self.fixed
        with self._lock:
            if self.per_call is None:
                size = 1
            else:
                wanted = self.target / self.per_call if self.per_call > 0 else self.limit
                size = min(self.limit, max(1, int(wanted)), max(1, self.largest) * GROWTH)
                if waiting is not None and spread > 1:
                    size = min(size, max(1, math.ceil(waiting / spread)))
            self.largest = max(self.largest, size)
            return size

    def timed(self, calls: int, seconds: float) -> None:
        """A pack of ``calls`` calls ran for ``seconds`` (their own run time, measured in the job)."""
        if calls < 1:
            return
        each = max(0.0, seconds) / calls
        with self._lock:
            known = self.per_call is not None and not self._guessed
            self.per_call = (1 - NEWEST_WEIGHT) * self.per_call + NEWEST_WEIGHT * each if known else each
            self._guessed = False

    def running_long(self, seconds: float) -> None:
        """A probe of one call has run for ``seconds`` and not ended: when that is beyond PROBE_PATIENCE its calls
        are long (packs of one), without waiting for its end. (A guess: the first time measured replaces it, as
        the time may count the start of the probe's job.)"""
        if self.per_call is None and seconds >= PROBE_PATIENCE:
            with self._lock:
                self.per_call, self._guessed = max(seconds, self.target), True
