"""What a job of the joblib backend runs: joblib's batches of calls, one after another, each with its value or
its exception, and the seconds it took.

A job (or a unit in a pilot) is one call of :func:`run_batches` through :mod:`b2batch.calls.calls_on_node`. Importing
this module runs its package's ``__init__`` first (Python imports a module's packages before it), which
registers the backend's name, so a nested ``Parallel`` that names it finds it in the job. The nesting level travels with the call and is set in
``$B2BATCH_JOBLIB_LEVEL`` for the calls (and the processes they start).
"""

from __future__ import annotations

import logging
import os
import pickle
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: The nesting level of the calls running in this process (0: not in a job of the backend).
LEVEL_VARIABLE = "B2BATCH_JOBLIB_LEVEL"


@dataclass
class BatchOutcome:
    """What one of joblib's batches gave: its value (a list, one per call), or the exception it raised."""

    value: Any = None
    error: BaseException | None = None
    traceback: str = ""
    seconds: float = 0.0
    calls: int = 0
    #: The place in the batch of the call that raised (or whose value cannot be pickled), when known.
    index: int | None = None


class _Marked:
    """A call of a batch that notes its place in the batch when it starts, so that a failure names it."""

    def __init__(self, function: Callable[..., Any], outcome: BatchOutcome, index: int) -> None:
        self.function, self.outcome, self.index = function, outcome, index

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.outcome.index = self.index
        return self.function(*args, **kwargs)


def _mark(batch: Any, outcome: BatchOutcome) -> None:
    items = getattr(batch, "items", None)  # joblib's BatchedCalls: (function, args, kwargs) per call
    if isinstance(items, list) and all(isinstance(item, tuple) and len(item) == 3 for item in items):
        batch.items = [(_Marked(f, outcome, i), args, kwargs) for i, (f, args, kwargs) in enumerate(items)]


def _unsendable(values: Any, outcome: BatchOutcome) -> BaseException | None:
    """None if the batch's values can be pickled; else an error for the first that cannot (its place noted)."""
    import cloudpickle

    try:
        cloudpickle.dumps(values)
        return None
    except Exception as e:  # noqa: BLE001 - find the value
        reason: BaseException = e
    outcome.index = None
    for index, value in enumerate(values if isinstance(values, list) else []):
        try:
            cloudpickle.dumps(value)
        except Exception as e:  # noqa: BLE001
            outcome.index, reason = index, e
            break
    shown = repr(values[outcome.index]) if outcome.index is not None else repr(values)
    return pickle.PicklingError(f"the value the call returned, {shown:.120}, cannot be pickled to send it back: "
                                f"{type(reason).__name__}: {reason}. Return plain data (numbers, strings, lists, "
                                f"dicts, arrays) instead.")


class BatchesRaised(Exception):
    """At least one batch of the job raised: the outcomes of all of them, so that each goes to its caller.
    Its message is the first exception's, for the job's record."""

    def __init__(self, outcomes: list[BatchOutcome]) -> None:
        first = next(o.error for o in outcomes if o.error is not None)
        super().__init__(f"{type(first).__name__}: {first}")
        self.outcomes = outcomes

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.outcomes,))


def current_level() -> int:
    """The nesting level of the calls running in this process, from ``$B2BATCH_JOBLIB_LEVEL``."""
    try:
        return max(0, int(os.environ.get(LEVEL_VARIABLE, "0")))
    except ValueError:
        return 0


def run_batches(batches: list[bytes], level: int, log_level: int,
                context_func: Callable[[], Any] | None = None) -> list[BatchOutcome]:
    """Run the pickled batches in order, every one even when one raises; their outcomes, or
    :class:`BatchesRaised` with all of them if any raised. ``$B2BATCH_JOBLIB_LEVEL`` says ``level`` while they
    run (to their nested calls and the processes they start) and is put back afterwards, for batches run in the
    caller's own process."""
    previous = os.environ.get(LEVEL_VARIABLE)
    os.environ[LEVEL_VARIABLE] = str(level)
    try:
        return _run_batches(batches, log_level, context_func)
    finally:
        if previous is None:
            os.environ.pop(LEVEL_VARIABLE, None)
        else:
            os.environ[LEVEL_VARIABLE] = previous


def _run_batches(batches: list[bytes], log_level: int, context_func: Callable[[], Any] | None) -> list[BatchOutcome]:
    logging.basicConfig(level=log_level, stream=sys.stdout,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger().setLevel(log_level)
    if context_func is not None:
        context_func()
    outcomes = []
    for payload in batches:
        outcome = BatchOutcome()
        begin = time.perf_counter()
        try:
            batch = pickle.loads(payload)
            outcome.calls = len(batch)
            _mark(batch, outcome)
            begin = time.perf_counter()  # the calls' own time: a first load may import modules
            outcome.value = batch()
        except BaseException as e:  # noqa: BLE001 - as joblib's own workers: everything goes back
            outcome.error = _sendable(e)
            outcome.traceback = traceback.format_exc()
            sys.stderr.write(outcome.traceback)
        outcome.seconds = time.perf_counter() - begin
        if outcome.error is None:  # a value that cannot go back fails its own batch, not the job's others
            outcome.error = _unsendable(outcome.value, outcome)
            if outcome.error is not None:
                outcome.value, outcome.traceback = None, f"{outcome.error}\n"
                sys.stderr.write(outcome.traceback)
        outcomes.append(outcome)
    if any(o.error is not None for o in outcomes):
        raise BatchesRaised(outcomes)
    return outcomes


def _sendable(error: BaseException) -> BaseException:
    """The exception itself if it survives pickling, else a RuntimeError that names it."""
    import cloudpickle

    try:
        pickle.loads(cloudpickle.dumps(error))
        return error
    except Exception as e:
        return RuntimeError(f"{type(error).__module__}.{type(error).__qualname__}: {error} (the exception could "
                            f"not be pickled to send it back: {e})")
