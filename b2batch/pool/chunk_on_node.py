"""The node side of a pool's job: apply the function to a chunk of items and hand back one pickled answer.

A job of :class:`b2batch.Pool` runs one call, :func:`run_chunk`, through :mod:`b2batch.calls.calls_on_node`. The
chunk's answer is pickled here, not by the call front-end, so that a value that cannot be pickled is found
and named by its item; and an exception of the function is part of the answer, not the job's failure: the
job exits 0 whenever the function ran, so a non-zero exit code always means the job itself was killed (a
scheduler, an out-of-memory killer, a user), which the engine submits again (``resubmit_failed_tasks``).
"""

from __future__ import annotations

import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

#: What the chunk does when the function raises: stop and hand the exception back (``multiprocessing.Pool``)
#: or print it to stderr, give None for the item and go on (pypoolparty).
RAISE, NONE = "raise", "none"


def __getattr__(name: str) -> Any:
    """:class:`UnpicklableResultError`, made on its first use (and found here by pickle): its base class is
    multiprocessing's, whose pool module a steering process need not import."""
    if name != "UnpicklableResultError":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from multiprocessing.pool import MaybeEncodingError

    class UnpicklableResultError(MaybeEncodingError):
        """A value returned by the function could not be pickled to send it back (``multiprocessing.Pool``
        raises its base class, :class:`multiprocessing.pool.MaybeEncodingError`, for the same reason)."""

        __qualname__ = "UnpicklableResultError"

        def __init__(self, message: str) -> None:  # noqa: D107 - one message, so that it pickles as it is
            Exception.__init__(self, message)
            self.exc = self.value = message

        def __str__(self) -> str:
            return str(self.args[0])

    globals()[name] = UnpicklableResultError  # later lookups find the class itself, not this function
    return UnpicklableResultError


@dataclass
class ChunkAnswer:
    """What one chunk gave: the values of the items that ran, and the failure that stopped it, if any."""

    values: list[Any] = field(default_factory=list)
    #: The exception of the item that failed (mode RAISE), with its position in the chunk and its traceback.
    error: BaseException | None = None
    index: int | None = None
    traceback: str = ""
    #: Positions of items that raised and got None (mode NONE).
    failed: list[int] = field(default_factory=list)
    #: Seconds the function ran over the chunk's items (its initializer not counted).
    seconds: float = 0.0

    def __reduce__(self) -> tuple[Any, ...]:  # the fields in order, not by name: half the bytes
        return ChunkAnswer, (self.values, self.error, self.index, self.traceback, self.failed, self.seconds)


def _dumps(answer: ChunkAnswer) -> bytes:
    import cloudpickle

    return cloudpickle.dumps(answer)


def _first_unpicklable(values: Sequence[Any]) -> tuple[int, BaseException]:
    import cloudpickle

    for index, value in enumerate(values):
        try:
            cloudpickle.dumps(value)
        except Exception as e:  # noqa: BLE001 - any reason counts
            return index, e
    return len(values) - 1, RuntimeError("the values could not be pickled together")


def _error_answer(answer: ChunkAnswer, error: BaseException, index: int, text: str) -> bytes:
    """The answer with ``error``; an exception that cannot be pickled goes back as a RuntimeError naming it."""
    answer.error, answer.index, answer.traceback = error, index, text
    try:
        return _dumps(answer)
    except Exception as e:  # noqa: BLE001
        answer.error = RuntimeError(f"{type(error).__module__}.{type(error).__qualname__}: {error} (the exception "
                                    f"could not be pickled to send it back: {e})")
        return _dumps(answer)


def _apply(function: Callable[..., Any], item: Any, how: str) -> Any:
    if how == "star":
        return function(*item)
    if how == "call":
        args, kwargs = item
        return function(*args, **kwargs)
    return function(item)


#: What run_shipped_chunk loaded, by (file, digest): a runner of a pilot loads a call's function once, not once
#: per chunk (the newest few kept).
_LOADED: dict[tuple[str, str], tuple[Any, ...]] = {}
_KEEP_LOADED = 8


def run_shipped_chunk(shipped: str, digest: str, items: Sequence[Any], start: int) -> bytes:
    """:func:`run_chunk` with the function, how, mode, initializer and initargs of the pool's call read from the
    file ``shipped`` (pickled there once per call of the pool, ``digest`` its SHA-256), not from each chunk."""
    key = (shipped, digest)
    loaded = _LOADED.get(key)
    if loaded is None:
        import pickle

        from b2batch.engine.digests import sha256_hex

        with open(shipped, "rb") as f:
            data = f.read()
        if sha256_hex(data) != digest:
            raise RuntimeError(f"b2batch pool: {shipped} is not the file this chunk was sent with (changed since)")
        loaded = _LOADED[key] = pickle.loads(data)
        while len(_LOADED) > _KEEP_LOADED:
            del _LOADED[next(iter(_LOADED))]
    function, how, mode, initializer, initargs = loaded
    return run_chunk(function, items, start, how, mode, initializer, initargs)


def run_chunk(function: Callable[..., Any], items: Sequence[Any], start: int, how: str, mode: str,
              initializer: Callable[..., Any] | None = None, initargs: Sequence[Any] = ()) -> bytes:
    """Apply ``function`` to each of ``items`` in order (``how``: "one" passes the item, "star" unpacks it,
    "call" takes it as ``(args, kwargs)``), after ``initializer(*initargs)``; the pickled
    :class:`ChunkAnswer`. ``start`` is the index of the first item in the whole input, for messages."""
    if initializer is not None:
        initializer(*initargs)
    answer = ChunkAnswer()
    begin = time.perf_counter()
    for offset, item in enumerate(items):
        try:
            answer.values.append(_apply(function, item, how))
        except Exception as e:  # noqa: BLE001 - the function's own failure is part of the answer
            text = traceback.format_exc()
            if mode == RAISE:
                sys.stderr.write(text)
                return _error_answer(answer, e, offset, text)
            sys.stderr.write(f"b2batch pool: item {start + offset} raised; its result is None\n{text}")
            answer.values.append(None)
            answer.failed.append(offset)
    answer.seconds = time.perf_counter() - begin
    try:
        return _dumps(answer)
    except Exception:  # noqa: BLE001 - find the value that cannot be pickled
        pass
    index, reason = _first_unpicklable(answer.values)
    message = (f"Error sending result: {answer.values[index]!r:.200}. Reason: '{type(reason).__name__}: "
               f"{reason}'. The value of item {start + index} cannot be pickled; return plain data instead.")
    text = f"b2batch pool: {message}\n"
    sys.stderr.write(text)
    if mode == RAISE:
        error = sys.modules[__name__].UnpicklableResultError(message)  # (the module's __getattr__ makes it once)
        return _error_answer(ChunkAnswer(values=answer.values[:index]), error, index, text)
    import cloudpickle

    for position in range(len(answer.values)):
        try:
            cloudpickle.dumps(answer.values[position])
        except Exception:  # noqa: BLE001
            answer.values[position] = None
            answer.failed.append(position)
    return _dumps(answer)
