"""Calls of :meth:`Executor.submit <b2batch.calls.executor.Executor.submit>` packed into shared jobs.

Each call waits in :class:`WaitingCalls` until the executor's thread puts it into a pack: a job that runs
:func:`b2batch.calls.calls_on_node.run_pack`, of the size :class:`~b2batch.calls.pack_sizing.PackSizer` gives
from the calls' measured times. A :class:`CallPack` is the futures of one job; :func:`deliver` hands each call
of an ended pack its own value or exception, with a note naming the call's number, its pack, the job and its
log.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from b2batch.calls.pack_sizing import PROBES, PackSizer

if TYPE_CHECKING:
    from b2batch.calls.calls_on_node import Outcome
    from b2batch.calls.futures import CallFuture

#: A pack smaller than the sizer's size goes out once no call came for this many seconds (or at shutdown).
LINGER = 0.05
#: Packs a round leaves room for, at least, out of the calls that wait (a second pilot or slot gets work).
SPREAD = 2

Member = tuple[bytes, "CallFuture"]


class CallPack:
    """The futures of one job: one submission of ``submit_calls``, or calls of ``submit`` packed (``packed``:
    the job runs ``run_pack``; ``probe``: a pack of one sent out before any call was timed)."""

    def __init__(self, futures: list[CallFuture], packed: bool, probe: bool = False) -> None:
        self.futures = futures
        self.packed = packed
        self.probe = probe

    def live(self) -> list[CallFuture]:
        return [future for future in self.futures if not future.done()]


class WaitingCalls:
    """Calls of ``submit`` not in a job yet, pickled, in the order they came."""

    def __init__(self, sizer: PackSizer) -> None:
        self.sizer = sizer
        self._calls: collections.deque[Member] = collections.deque()
        self._last = 0.0

    def __len__(self) -> int:
        return len(self._calls)

    def add(self, payload: bytes, future: CallFuture) -> bool:
        """Keep a call (the caller's thread); whether it is the first that waits (the executor's thread should wake)."""
        first = not self._calls
        self._last = time.monotonic()
        self._calls.append((payload, future))
        return first

    def drain(self) -> list[CallFuture]:
        """The futures of every call that waits, none left."""
        futures = []
        while self._calls:
            futures.append(self._calls.popleft()[1])
        return futures

    def packs(self, probes_out: int, closing: bool) -> Iterator[tuple[list[Member], bool]]:
        """The packs to send now, each with whether it is a probe: while nothing is timed, packs of one until
        PROBES are out; then full packs of the sizer's size while calls still come; once they stopped coming for
        LINGER seconds (or the caller is closing), the rest too, spread over at least SPREAD packs."""
        quiet = closing or time.monotonic() - self._last >= LINGER
        waiting = len(self._calls) if quiet else None  # the spread: over a backlog that is all there
        while self._calls:
            probing = self.sizer.probing
            if probing and probes_out >= PROBES:
                return
            size = self.sizer.next_size(waiting, SPREAD)
            if len(self._calls) < size and not quiet:
                return
            members = []
            while self._calls and len(members) < size:
                member = self._calls.popleft()
                if not member[1].cancelled():
                    members.append(member)
            if members:
                probes_out += probing
                yield members, probing


def deliver(name: str, job: Any, pack: CallPack, outcomes: list[Outcome], remote_traceback: Any) -> list[str]:
    """Hand each call of an ended pack its value or its exception (with its remote traceback as the cause and a
    note naming the call, its pack, the job and its log); what failed, in words."""
    failures = []
    for future, outcome in zip(pack.futures, outcomes):
        if future.done():
            continue
        if outcome.error is None:
            future.set_result(outcome.values[0])
            continue
        error = outcome.error
        error.__cause__ = remote_traceback(outcome.traceback)
        packed = f", one of {len(pack.futures)} packed in {job.name}" if len(pack.futures) > 1 else ""
        error.add_note(f"Raised in {name} #{future.number}{packed}: {job.system} job {job.job_id} (log: "
                       f"{job.files.stderr})")
        failures.append(f"call #{future.number} raised {type(error).__name__}: {error}")
        future.set_exception(error)
    return failures
