"""Sending jobs to a batch system: in bulk, throttled, and retried with back-off without blocking.

luigi's worker starts the tasks that became runnable one after the other and then asks each whether it is
alive. :meth:`BatchProcess.start` only queues its job here; the first question afterwards flushes the queue:
the jobs go to the batch system together (as job arrays where the system has them), at most
``max_jobs_in_flight`` at a time. In a graph of thousands of tasks luigi may take minutes to start them all,
so the queue also goes once ``max_array_size`` jobs wait or the first has waited ``submission_window``
seconds, a window that doubles while the start of tasks goes on (:meth:`Submitter.flush_if_due`). A
transient scheduler error puts the jobs back with a growing pause (1, 2, 4 ... s) while the other tasks
carry on; after ``scheduler_unreachable_timeout`` seconds of failures the jobs fail with the scheduler's last
answer.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from b2batch.commands import TransientCommandError
from b2batch.errors import B2BatchError
from b2batch.settings import get_setting

if TYPE_CHECKING:
    from b2batch.process import BatchProcess

logger = logging.getLogger(__name__)


class Submitter:
    """The jobs of one batch system that wait to be submitted, and those in flight."""

    def __init__(self, system: type) -> None:
        self.system = system
        self.waiting: deque[BatchProcess] = deque()
        self._waiting_ids: set[int] = set()  # so that done() costs O(1), not a scan of thousands of jobs
        self.in_flight: set[int] = set()
        self.attempts = 0
        self.failing_since: float | None = None
        self.next_attempt = 0.0
        self.submissions = 0  # calls of the submit command, for benchmarks
        self._first_waiting_since = 0.0
        self._window = 0.0
        self._last_flush = float("-inf")

    def enqueue(self, job: BatchProcess) -> None:
        if not self.waiting:
            now = time.monotonic()
            if now - self._last_flush > self._window:  # not in a long start of tasks: a new window
                self._window = float(get_setting("submission_window"))
            self._first_waiting_since = now
        self.waiting.append(job)
        self._waiting_ids.add(id(job))

    def flush_if_due(self) -> None:
        """Submit what waits if it should not wait for more jobs to join its arrays: a full array waits, or
        the first job has waited the window (``submission_window`` seconds at first, twice as long after each
        time it ran out while luigi kept starting tasks, so that a start of tasks that lasts T seconds costs
        about log2(T) submissions more than N / max_array_size)."""
        if not self.waiting:
            return
        if len(self.waiting) < int(get_setting("max_array_size")):
            if time.monotonic() - self._first_waiting_since < self._window:
                return
            self._window *= 2
        self.flush()

    def add_in_flight(self, job: BatchProcess) -> None:
        self.in_flight.add(id(job))

    def done(self, job: BatchProcess) -> None:
        self.in_flight.discard(id(job))
        if id(job) in self._waiting_ids:
            self._waiting_ids.discard(id(job))
            self.waiting.remove(job)

    def flush(self) -> None:
        """Submit what waits, as far as the throttle allows and no back-off pause is running."""
        if not self.waiting or time.monotonic() < self.next_attempt:
            return
        limit = get_setting("max_jobs_in_flight")
        room = len(self.waiting) if not limit else int(limit) - len(self.in_flight)
        if room <= 0:
            return
        batch = [self.waiting.popleft() for _ in range(min(room, len(self.waiting)))]
        self._last_flush = self._first_waiting_since = time.monotonic()  # those left (throttle) wait anew
        self._waiting_ids.difference_update(id(job) for job in batch)
        for group in self.system.groups_for_submission(batch):
            if not self._submit(group):
                # Keep the order: what was not tried yet goes back in front as well.
                rest = batch[batch.index(group[0]):]
                self.waiting.extendleft(reversed(rest))
                self._waiting_ids.update(id(job) for job in rest)
                return

    def _submit(self, group: list[BatchProcess]) -> bool:
        try:
            self.submissions += 1
            self.system.submit_group(group)
        except TransientCommandError as e:
            now = time.monotonic()
            self.failing_since = self.failing_since or now
            limit = float(get_setting("scheduler_unreachable_timeout"))
            if now - self.failing_since > limit:
                self._fail(group, f"{e}\nThe batch system kept failing for {limit:g} s "
                           f"(setting scheduler_unreachable_timeout); nothing was submitted.")
                return True
            self.attempts += 1
            pause = min(2.0 ** (self.attempts - 1), 60.0)
            self.next_attempt = now + pause
            logger.warning("%s; trying again in %g s (attempt %d)", e, pause, self.attempts + 1)
            return False
        except B2BatchError as e:
            self._fail(group, str(e))
            return True
        self.attempts = 0
        self.failing_since = None
        for job in group:
            self.add_in_flight(job)
            job.submitted()
        return True

    @staticmethod
    def _fail(group: list[Any], message: str) -> None:
        for job in group:
            job.submission_failed(message)
