"""Python's cyclic garbage collector while a run steers (:func:`steering`).

A run in flight holds each unit's job, its files, its future and its record from its submission until its end,
which comes back after many other units' work: with CPython's default first threshold (700 new container
objects) those objects outlive two young collections and are promoted, and the old generations then collect
again and again what dies a few milliseconds later. Measured on ``Pool.imap`` of 50,000 trivial units in
pilots (``bench/million_units.py``): a fifth of the steering process's CPU went to the collector, nearly all of
it to collecting the older generations. While a run steers, the first threshold is raised to
:data:`STEERING_THRESHOLD`, so that a unit's objects die young; the collector still runs (reference cycles are
freed after at most that many new objects), and the thresholds the process had come back when the last run
that steers in it stops.

The collector's thresholds belong to the interpreter, not to a run: this module keeps the one count of the
runs steering in the process that putting them back needs. A program that sets thresholds of its own while a
run steers keeps them (they are not put back over its own). A job forked from the steering process starts with
the thresholds the process had before (:func:`as_before`), as a job in a fresh interpreter would.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

#: The first generation's threshold while a run steers (CPython's default is 700; the older generations keep
#: theirs). About 50,000 new objects: a few hundred units' work, a collection of a few milliseconds.
STEERING_THRESHOLD = 50_000


class _Thresholds:
    """The runs steering in this process, and the thresholds to put back when the last one stops."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.steering = 0
        self.before: tuple[int, ...] | None = None  # the thresholds to put back; None: not raised by us
        self.raised: tuple[int, ...] | None = None  # what we set

    def enter(self) -> None:
        with self.lock:
            self.steering += 1
            if self.steering > 1:
                return
            current = gc.get_threshold()
            if 0 < current[0] < STEERING_THRESHOLD:  # 0: automatic collection is off; larger: the program's own
                self.before = current
                self.raised = (STEERING_THRESHOLD, *current[1:])
                gc.set_threshold(*self.raised)

    def leave(self) -> None:
        with self.lock:
            self.steering -= 1
            if self.steering > 0 or self.before is None:
                return
            if gc.get_threshold() == self.raised:  # not changed by the program since
                gc.set_threshold(*self.before)
            self.before = self.raised = None


_THRESHOLDS = _Thresholds()


@contextlib.contextmanager
def steering() -> Iterator[None]:
    """While a run steers: the collector's first threshold at least :data:`STEERING_THRESHOLD`."""
    _THRESHOLDS.enter()
    try:
        yield
    finally:
        _THRESHOLDS.leave()


def as_before() -> None:
    """In a process forked from the steering process: the thresholds the process had before its runs steered."""
    before = _THRESHOLDS.before
    if before is not None and gc.get_threshold() == _THRESHOLDS.raised:
        gc.set_threshold(*before)
