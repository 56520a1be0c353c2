"""What the calls of a :class:`~b2batch.pool.Pool` hand back: ``multiprocessing.Pool``'s result objects.

- :class:`AsyncResult` (``apply_async``) and :class:`MapResult` (``map_async``, ``starmap_async``):
  ``get(timeout)``, ``wait(timeout)``, ``ready()``, ``successful()``; the first failure ends a map, as in
  ``multiprocessing``.
- :class:`ItemIterator` (``imap``, ``imap_unordered``): the values one by one, in input order or as chunks
  end; ``next(timeout)``; an item's exception raises at its place, and iteration goes on after it.

The pool's dispatcher fills them chunk by chunk (:meth:`MapResult.set_chunk`, :meth:`ItemIterator.set_chunk`)
from its own thread; callbacks run in that thread, as they run in the result handler thread of
``multiprocessing.Pool``.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable, Iterator
from typing import Any

Callback = Callable[[Any], object] | None


class AsyncResult:
    """The result of one call (``apply_async``)."""

    def __init__(self, callback: Callback = None, error_callback: Callback = None) -> None:
        self._event = threading.Event()
        self._callback = callback
        self._error_callback = error_callback
        self._value: Any = None
        self._error: BaseException | None = None

    def ready(self) -> bool:
        return self._event.is_set()

    def successful(self) -> bool:
        """Whether the call ended without an exception; a ValueError while it has not ended."""
        if not self.ready():
            raise ValueError(f"{self!r} not ready")
        return self._error is None

    def wait(self, timeout: float | None = None) -> None:
        self._event.wait(timeout)

    def get(self, timeout: float | None = None) -> Any:
        """The value; the call's exception raises here; ``multiprocessing.TimeoutError`` after ``timeout``."""
        self.wait(timeout)
        if not self.ready():
            raise _timeout_error()
        if self._error is not None:
            raise self._error
        return self._value

    # --- the dispatcher's side ---------------------------------------------------------------------------

    def expect(self, count: int) -> None:
        """``count`` items in all (an apply has one)."""

    def set_chunk(self, start: int, values: list[Any]) -> None:
        self._finish(values[0], None)

    def fail(self, start: int, end: int, error: BaseException) -> None:
        """The items ``start`` to ``end - 1`` give ``error`` (their first raised it, or their job was lost)."""
        self._finish(None, error)

    @property
    def wants_more(self) -> bool:
        """Whether chunks not yet submitted still matter (a failed map needs no more)."""
        return not self.ready()

    def _finish(self, value: Any, error: BaseException | None) -> None:
        if self.ready():
            return
        self._value, self._error = value, error
        try:
            if error is None and self._callback is not None:
                self._callback(value)
            elif error is not None and self._error_callback is not None:
                self._error_callback(error)
        finally:
            self._event.set()


class MapResult(AsyncResult):
    """The result of a map: the list of values in input order, once every chunk ended."""

    def __init__(self, callback: Callback = None, error_callback: Callback = None) -> None:
        super().__init__(callback, error_callback)
        self._values: list[Any] = []
        self._left: int | None = None
        self._lock = threading.Lock()

    def expect(self, count: int) -> None:
        with self._lock:
            self._values = [None] * count
            self._left = count
        if count == 0:
            self._finish([], None)

    def set_chunk(self, start: int, values: list[Any]) -> None:
        with self._lock:
            self._values[start:start + len(values)] = values
            assert self._left is not None
            self._left -= len(values)
            done = self._left == 0
        if done:
            self._finish(self._values, None)


class ItemIterator:
    """The values of an ``imap`` (``ordered``) or ``imap_unordered``, as they come."""

    def __init__(self, ordered: bool) -> None:
        self.ordered = ordered
        self._condition = threading.Condition()
        self._by_index: dict[int, tuple[bool, Any, int]] = {}  # index -> (ok, value or error, next index)
        self._arrived: collections.deque[tuple[bool, Any]] = collections.deque()
        self._next = 0  # ordered: the index to hand out next; unordered: how many items were accounted for
        self._length: int | None = None

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        return self.next()

    def next(self, timeout: float | None = None) -> Any:
        """The next value; an item's exception raises here; ``multiprocessing.TimeoutError`` after
        ``timeout``."""
        with self._condition:
            while True:
                found = self._take()
                if found is not None:
                    ok, value = found
                    if ok:
                        return value
                    raise value
                if self._length is not None and self._next >= self._length and not self._arrived:
                    raise StopIteration
                if not self._condition.wait(timeout):
                    raise _timeout_error()

    def _take(self) -> tuple[bool, Any] | None:
        if not self.ordered:
            return self._arrived.popleft() if self._arrived else None
        entry = self._by_index.pop(self._next, None)
        if entry is None:
            return None
        ok, value, following = entry
        self._next = following
        return ok, value

    # --- the dispatcher's side ---------------------------------------------------------------------------

    wants_more = True

    def expect(self, count: int) -> None:
        with self._condition:
            self._length = count
            self._condition.notify_all()

    def set_chunk(self, start: int, values: list[Any]) -> None:
        with self._condition:
            for offset, value in enumerate(values):
                if self.ordered:
                    self._by_index[start + offset] = (True, value, start + offset + 1)
                else:
                    self._arrived.append((True, value))
            if not self.ordered:
                self._next += len(values)
            if not self.ordered or start == self._next:  # else the reader still waits for an earlier item
                self._condition.notify_all()

    def fail(self, start: int, end: int, error: BaseException) -> None:
        with self._condition:
            if self.ordered:
                self._by_index[start] = (False, error, end)
            else:
                self._arrived.append((False, error))
                self._next += end - start
            self._condition.notify_all()


def _timeout_error() -> Exception:
    """``multiprocessing.TimeoutError`` (imported when raised: a pool that never times out needs none of it)."""
    import multiprocessing

    return multiprocessing.TimeoutError()
