"""Sending jobs to a batch system: in bulk, throttled, and retried with back-off without blocking.

A front-end hands the run the jobs that became ready one after the other; :meth:`Run.submit` only queues
them here, and the run's next poll flushes the queue: the jobs go to the batch system together (as job arrays
where the system has them), at most ``max_jobs_in_flight`` at a time. While a front-end goes on handing out
jobs, the queue also goes once ``max_array_size`` jobs wait or the first has waited ``submission_window``
seconds, a window that doubles while the hand-out goes on (:meth:`Submitter.flush_if_due`); jobs that gain
nothing by waiting for others (units for pilots: :meth:`BatchSystem.takes_now`) go every 0.2 s instead. A
transient scheduler error puts the jobs back with a growing pause (1, 2, 4 ... s) while the other tasks
carry on; after ``scheduler_unreachable_timeout`` seconds of failures the jobs fail with the scheduler's last
answer.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from b2batch.errors import B2BatchError, RunStoppingError, TransientCommandError

if TYPE_CHECKING:
    from b2batch.engine.config import RunConfig
    from b2batch.engine.job import Job

logger = logging.getLogger(__name__)
#: Seconds between two submissions of jobs that need not wait for arrays (:meth:`Submitter._flush_early`).
EARLY_EVERY = 0.2
#: Seconds before the system is asked again while it has said of no job yet that it gains nothing by waiting
#: (doubling up to :data:`EARLY_EVERY`): a hand-out of short tasks becomes units for pilots once a few are ready,
#: and the pilots' submission should not wait for the next slice.
FIRST_EARLY = 0.01


class Submitter:
    """The jobs of one batch system that wait to be submitted, and those in flight."""

    def __init__(self, system: Any, submitted: Callable[[Job], None], failed: Callable[[Job, str], None],
                 config: RunConfig) -> None:
        self.system = system
        self.config = config
        self._submitted = submitted
        self._failed = failed
        self.waiting: deque[Job] = deque()
        self._waiting_ids: set[int] = set()  # so that done() costs O(1), not a scan of thousands of jobs
        self.in_flight: dict[int, Job] = {}
        self.attempts = 0
        self.failing_since: float | None = None
        self.next_attempt = 0.0
        self._first_waiting_since = 0.0
        self._window = 0.0
        self._last_flush = float("-inf")
        self._asked_early = float("-inf")
        self._early_step = 0.0  # (the first ask comes at once)
        #: Most jobs in flight at once (None: no limit); the run's max_jobs_in_flight.
        self.limit: int | None = config.max_jobs_in_flight

    def enqueue(self, job: Job) -> None:
        if not self.waiting:
            now = time.monotonic()
            if now - self._last_flush > self._window:  # not in a long start of tasks: a new window
                self._window = self.config.submission_window
            self._first_waiting_since = now
        self.waiting.append(job)
        self._waiting_ids.add(id(job))

    def flush_if_due(self) -> None:
        """Submit what waits if it should not wait for more jobs to join its arrays: a full array waits, or
        the first job has waited the window (``submission_window`` seconds at first, twice as long after each
        time it ran out while the front-end kept handing out jobs, so that a start of tasks that lasts T seconds costs
        about log2(T) submissions more than N / max_array_size)."""
        if not self.waiting:
            return
        if len(self.waiting) < self.config.max_array_size:
            now = time.monotonic()
            if now - self._first_waiting_since < self._window:
                self._flush_early(now)
                return
            self._window *= 2
        self.flush()

    def _flush_early(self, now: float) -> None:
        """Before the window ends, submit the waiting jobs that the system says gain nothing by waiting (units for
        pilots, which start on the first units instead of after the whole hand-out); asked at most every
        :data:`EARLY_EVERY` seconds (so a long hand-out goes in slices of that length), sooner while it never
        named a job (:data:`FIRST_EARLY`). The others wait on in their window, for their arrays."""
        if now - self._asked_early < self._early_step:
            return
        self._asked_early = now
        early = self.system.takes_now(list(self.waiting))
        if not early:
            self._early_step = min(max(FIRST_EARLY, 2 * self._early_step), EARLY_EVERY)
            return
        self._early_step = EARLY_EVERY
        if len(early) < len(self.waiting):
            chosen = {id(job) for job in early}
            self.waiting = deque([*early, *(job for job in self.waiting if id(job) not in chosen)])
        self.flush(len(early))

    def add_in_flight(self, job: Job) -> None:
        self.in_flight[id(job)] = job

    def done(self, job: Job) -> None:
        self.in_flight.pop(id(job), None)
        if id(job) in self._waiting_ids:
            self._waiting_ids.discard(id(job))
            self.waiting.remove(job)

    def flush(self, count: int | None = None) -> None:
        """Submit what waits (the first ``count`` jobs: the others keep their window), as far as the throttle
        allows and no back-off pause is running."""
        if not self.waiting or time.monotonic() < self.next_attempt:
            return
        limit = self.limit
        room = len(self.waiting) if limit is None else limit - len(self.in_flight)
        if room <= 0:
            return
        batch = [self.waiting.popleft() for _ in range(min(room, len(self.waiting), count or len(self.waiting)))]
        self._last_flush = time.monotonic()
        if count is None:
            self._first_waiting_since = self._last_flush  # those left (throttle) wait anew
        self._waiting_ids.difference_update(id(job) for job in batch)
        for group in self.system.groups(batch):
            if not self._submit(group):
                # Keep the order: what was not tried yet goes back in front as well.
                rest = batch[batch.index(group[0]):]
                self.waiting.extendleft(reversed(rest))
                self._waiting_ids.update(id(job) for job in rest)
                return

    def _submit(self, group: list[Job]) -> bool:
        try:
            self.system.submit(group)
        except TransientCommandError as e:
            now = time.monotonic()
            self.failing_since = self.failing_since or now
            limit = self.config.scheduler_unreachable_timeout
            if now - self.failing_since > limit:
                self._fail(group, f"{e}\nThe batch system kept failing for {limit:g} s "
                           f"(setting scheduler_unreachable_timeout); nothing was submitted.")
                return True
            self.attempts += 1
            pause = min(2.0 ** (self.attempts - 1), 60.0)
            self.next_attempt = now + pause
            logger.warning("%s; trying again in %g s (attempt %d)", e, pause, self.attempts + 1)
            return False
        except RunStoppingError:
            raise  # no job of the run can get past it: the run stops with its one message
        except B2BatchError as e:
            self._fail(group, str(e))
            return True
        self.attempts = 0
        self.failing_since = None
        for job in group:
            self.add_in_flight(job)
            self._submitted(job)
        return True

    def _fail(self, group: list[Job], message: str) -> None:
        for job in group:
            self._failed(job, message)
