"""One status query per batch system per poll, for all jobs of the run, with back-off while nothing changes.

The run asks its batch systems about their jobs in every turn of its loop. A :class:`JobMonitor` answers
from its cache and asks the scheduler again only when the poll interval has passed: one command for all
tracked jobs, whatever their number. It also says which jobs' answers changed since they were last looked at
(:meth:`JobMonitor.take_changed`), so that a poll costs the run work for the jobs that changed, not for all.
The interval starts at ``poll_interval`` and grows by half after every poll that saw no change, up to
``max_poll_interval``; any change sets it back to the start.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from b2batch.engine.jobstate import NativeState
from b2batch.errors import SchedulerCommandError

logger = logging.getLogger(__name__)

QueryFunction = Callable[[list[str]], dict[str, NativeState]]


class JobMonitor:
    """The cached states of the tracked jobs of one batch system."""

    def __init__(self, name: str, query: QueryFunction, intervals: tuple[float, float] = (1.0, 30.0)) -> None:
        self.name = name
        self.query = query
        self.tracked: set[str] = set()
        self.states: dict[str, NativeState] = {}
        self.polls = 0
        self.failures_since: float | None = None
        self.last_error: SchedulerCommandError | None = None
        self._last_poll = 0.0
        self._interval: float | None = None
        self.seen: dict[str, NativeState] = {}
        self.changed: set[str] = set()
        #: poll_interval and max_poll_interval: the run's at first, then those of the jobs last submitted.
        self.intervals: tuple[float, float] = intervals

    def track(self, job_id: str) -> None:
        self.tracked.add(job_id)
        self.changed.add(job_id)

    def take_changed(self) -> set[str]:
        """The tracked jobs whose answer changed (or that were tracked anew) since the last call."""
        changed, self.changed = self.changed, set()
        return changed & self.tracked

    def forget(self, job_id: str) -> None:
        self.tracked.discard(job_id)
        self.states.pop(job_id, None)
        self.changed.discard(job_id)

    def state(self, job_id: str) -> NativeState | None:
        """The job's state as of the last poll (polling first if it is due); None if the scheduler did not
        list the job."""
        self.poll_if_due()
        return self.states.get(job_id)

    def invalidate(self) -> None:
        """Poll at the next question (e.g. after submitting new jobs)."""
        self._last_poll = 0.0

    def poll_if_due(self) -> None:
        # Asked for every running job about once a second: return at once when no poll is due.
        if self._interval is not None and time.monotonic() - self._last_poll < self._interval:
            return
        minimum, maximum = self.intervals
        if self._interval is None:
            self._interval = minimum
        if time.monotonic() - self._last_poll < self._interval or not self.tracked:
            return
        self._last_poll = time.monotonic()
        try:
            states = self.query(sorted(self.tracked))
        except SchedulerCommandError as e:
            self.failures_since = self.failures_since or time.monotonic()
            self.last_error = e
            logger.warning("%s status query failed (jobs keep their last known state): %s", self.name, e)
            return
        self.polls += 1
        self.failures_since = None
        self.last_error = None
        self.seen = dict(states)  # everything the scheduler listed, tracked or not (for re-attaching)
        mine = {job_id: state for job_id, state in states.items() if job_id in self.tracked}
        differ = {job_id for job_id in self.tracked if mine.get(job_id) != self.states.get(job_id)}
        changed = bool(differ)
        self.changed |= differ
        self.states = mine
        self._interval = minimum if changed else min(maximum, self._interval * 1.5)

    def unreachable_for(self) -> float:
        """Seconds since the status queries started failing (0 while they work)."""
        return 0.0 if self.failures_since is None else time.monotonic() - self.failures_since
