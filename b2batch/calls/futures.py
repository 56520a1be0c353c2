"""What callers of :class:`~b2batch.calls.executor.Executor` hold: a :class:`CallFuture` per submission, the errors
it may raise (:class:`CallJobError`; a call's own exception with a :class:`RemoteTraceback` as its cause), and
:func:`as_completed`."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterable
from typing import TYPE_CHECKING

from b2batch.errors import B2BatchError

if TYPE_CHECKING:
    from b2batch.calls.executor import Executor
    from b2batch.engine import Job


class CallJobError(B2BatchError):
    """The job of a call ended without a result: killed, lost beyond ``max_resubmissions``, rejected."""


class RemoteTraceback(Exception):
    """The traceback of an exception raised in a job, as the job printed it (set as the exception's cause)."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return f"\n\"\"\"\n{self.text.rstrip()}\n\"\"\""


class CallFuture(concurrent.futures.Future):
    """The result of one job's calls: a list of values (or the value, for :meth:`Executor.submit`). A call of
    :meth:`Executor.submit` that waits to be packed has no job yet (``job`` None); ``number`` is its place among
    the executor's calls."""

    def __init__(self, executor: Executor, job: Job | None, single: bool, number: int = 0) -> None:
        super().__init__()
        self.executor = executor
        self.job = job
        self.single = single
        self.number = number

    def cancel(self) -> bool:
        """Cancel the call if it has not ended: its batch job is cancelled too."""
        if self.cancelled():
            return True
        if not super().cancel():
            return False
        self.executor._requests.put(("cancel", [self]))
        self.executor._wake.set()
        return True


def as_completed(futures: Iterable[CallFuture], timeout: float | None = None) -> Iterable[CallFuture]:
    """The futures as they end (those of :class:`Executor` are :mod:`concurrent.futures` futures)."""
    return concurrent.futures.as_completed(list(futures), timeout=timeout)
