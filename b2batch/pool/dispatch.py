"""The pool's dispatcher: cuts each call of the pool into chunks, keeps a window of them in flight as jobs of
the pool's :class:`~b2batch.calls.Executor`, and turns each ended job into values, an exception, or a lost
chunk.

One thread per pool. It hands out chunks while fewer than ``window`` jobs are in flight (so the work dir
holds the folders of at most that many jobs, and an input iterator is read only as far as needed), and as
each job ends it fills the call's result, marks failures in the run's record for the progress display and
summary, and packs the job's files (:mod:`b2batch.pool.packing`).
"""

from __future__ import annotations

import collections
import itertools
import logging
import os
import pickle
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from b2batch.calls import CallFuture, CallJobError, Executor, RemoteTraceback, pickling
from b2batch.calls.pack_sizing import PROBES, PackSizer
from b2batch.engine.digests import sha256_hex
from b2batch.pool import chunk_on_node
from b2batch.pool.packing import OUTPUTS, Packer

logger = logging.getLogger(__name__)


class PoolJobLostError(CallJobError, RuntimeError):
    """A chunk's job ended without an answer after ``max_num_resubmissions`` resubmissions (killed, lost,
    out of memory). A RuntimeError, as pypoolparty raises when its resubmission limit is reached."""


class PoolTerminatedError(RuntimeError):
    """The pool was terminated before these items ran."""


def _name(function: Any) -> str:
    return repr(getattr(function, "__qualname__", None) or getattr(function, "__name__", None) or function)


def chunks_of(iterable: Iterable[Any], size: int | Callable[[], int]) -> Iterator[tuple[int, list[Any]]]:
    """``(index of the first item, items)`` of at most ``size`` items each (or as many as ``size()`` says when
    each chunk is cut), read from ``iterable`` lazily."""
    iterator, start = iter(iterable), 0
    while True:
        items = list(itertools.islice(iterator, size() if callable(size) else size))
        if not items:
            return
        yield start, items
        start += len(items)


@dataclass(eq=False)
class Batch:
    """One call of the pool (a map, an imap, an apply): its function and its items in chunks."""

    label: str
    function: Callable[..., Any]
    #: How an item is passed: "one" (f(item)), "star" (f(*item)), "call" (item is (args, kwargs)).
    how: str
    result: Any  # results.AsyncResult, MapResult or ItemIterator
    chunks: Iterator[tuple[int, list[Any]]]
    #: The number of items when known from the start (map); else counted as the input is read.
    length: int | None = None
    read: int = 0
    submitted: int = 0
    #: Items per chunk.
    size: int = 1
    #: Chunk sizes from the items' measured times (an input of unknown length without a chunksize), else None.
    sizer: PackSizer | None = None
    #: The function, initializer and initargs, pickled once for all chunks (empty: they could not be, and each
    #: chunk pickles them itself so that the error names what failed); None until the first chunk.
    shipped: tuple[Any, ...] | None = None


@dataclass(eq=False)
class _Chunk:
    batch: Batch
    number: int
    start: int
    count: int
    future: CallFuture
    meta: dict[str, Any] = field(default_factory=dict)


class Dispatcher:
    """Feeds the executor chunk by chunk and hands back what the jobs gave."""

    def __init__(self, executor: Executor, packer: Packer, window: int, mode: str,
                 initializer: Callable[..., Any] | None = None, initargs: tuple[Any, ...] = ()) -> None:
        self.executor = executor
        self.packer = packer
        self.window = max(1, window)
        self.mode = mode
        self.initializer = initializer
        self.initargs = initargs
        #: Whether a job failed, an item raised, or a chunk was lost (the work dir is then kept).
        self.failed = False
        self._incoming: queue.SimpleQueue[Batch] = queue.SimpleQueue()
        self._open: list[Batch] = []  # batches of known length with chunks not submitted yet (for held())
        self._lock = threading.Lock()
        self._ended: queue.SimpleQueue[CallFuture | None] = queue.SimpleQueue()
        self._batches: collections.deque[Batch] = collections.deque()
        self._chunks: dict[int, _Chunk] = {}  # id(future) -> chunk, for jobs in flight
        self._closing = False
        self._terminated = False
        self._thread = threading.Thread(target=self._loop, name=f"b2batch-pool-{executor.name}", daemon=True)
        self._thread.start()

    # --- the pool's side ---------------------------------------------------------------------------------

    def add(self, batch: Batch) -> None:
        if batch.length is not None:
            batch.result.expect(batch.length)
            with self._lock:
                self._open.append(batch)
        self._incoming.put(batch)
        self._ended.put(None)

    def held(self) -> int:
        """Chunks of known length not submitted yet (the run's job shaping counts them as ready: a map's first
        chunk should not get a job of its own because the others were not handed over yet). A call that needs
        no more (it failed, or the pool was terminated) holds nothing: its chunks will never be submitted."""
        with self._lock:
            self._open = [b for b in self._open
                          if b.length is not None and b.length > b.read and b.result.wants_more]
            return sum(-(-(b.length - b.read) // b.size) for b in self._open)  # type: ignore[operator]

    def busy(self) -> bool:
        """Whether calls of the pool have not ended."""
        return bool(self._chunks or self._batches or not self._incoming.empty())

    def close(self) -> None:
        """No more calls: the thread ends once the last job ended."""
        self._closing = True
        self._ended.put(None)

    def terminate(self) -> None:
        """No more chunks go out; those not submitted, and those in flight (their jobs are cancelled), fail
        with :class:`PoolTerminatedError`."""
        self._terminated = self._closing = True
        self.executor.cancel([chunk.future for chunk in list(self._chunks.values())])  # one request for all
        self._ended.put(None)

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    # --- the thread ----------------------------------------------------------------------------------------

    def _loop(self) -> None:
        try:
            while True:
                while not self._incoming.empty():
                    self._batches.append(self._incoming.get())
                if self._terminated:
                    self._drop_unsubmitted()
                else:
                    self._fill()
                if self._closing and not self.busy():
                    break
                try:
                    future = self._ended.get(timeout=0.5)
                    while True:
                        if future is not None:
                            self._handle(future)
                        future = self._ended.get_nowait()
                except queue.Empty:
                    pass
                self.packer.flush()
                self.packer.sweep()
        except BaseException as e:  # nothing may wait for ever on a result of a dead thread
            logger.exception("b2batch pool %s: the dispatcher stopped", self.executor.name)
            self.failed = True
            for chunk in self._chunks.values():
                chunk.batch.result.fail(chunk.start, chunk.start + chunk.count, e)
            self._batches.extend(self._incoming.get() for _ in range(self._incoming.qsize()))
            for batch in self._batches:
                batch.result.fail(batch.read, batch.read + 1, e)
        finally:
            self.packer.sweep(force=True)

    def _drop_unsubmitted(self) -> None:
        while self._batches:
            batch = self._batches.popleft()
            error = PoolTerminatedError(f"{batch.label}: the pool was terminated before item {batch.read} ran")
            batch.result.fail(batch.read, max(batch.length or 0, batch.read + 1), error)
            if batch.length is None:
                batch.result.expect(batch.read + 1)

    def _probing(self, batch: Batch) -> bool:
        """Whether the batch's chunk sizes wait for a first time: PROBES chunks of one are out and none ended (a
        probe that has run PROBE_PATIENCE seconds makes its items long, without waiting for its end)."""
        sizer = batch.sizer
        if sizer is None or not sizer.probing:
            return False
        probes = [chunk for chunk in self._chunks.values() if chunk.batch is batch]
        now = time.time()
        for chunk in probes:
            record = self.executor.run.record.jobs.get(chunk.future.job.key)
            if record is not None and record.started_at:
                sizer.running_long(now - record.started_at)
        return sizer.probing and len(probes) >= PROBES

    def _fill(self) -> None:
        prepared: list[CallFuture] = []  # handed to the executor's thread at once
        try:
            self._fill_into(prepared)
        finally:
            self.executor.send(prepared)

    def _fill_into(self, prepared: list[CallFuture]) -> None:
        while len(self._chunks) < self.window and self._batches:
            batch = self._batches[0]
            if not batch.result.wants_more:
                self._batches.popleft()
                continue
            if self._probing(batch):
                return
            try:
                found = next(batch.chunks, None)
            except Exception as e:  # noqa: BLE001 - the input iterator raised: its place gets the error
                batch.result.fail(batch.read, batch.read + 1, e)
                batch.result.expect(batch.read + 1)
                self._batches.popleft()
                continue
            if found is None:
                if batch.length is None:
                    batch.result.expect(batch.read)
                self._batches.popleft()
                continue
            start, items = found
            batch.read = start + len(items)
            future = self._prepare(batch, start, items)
            if future is not None:
                prepared.append(future)

    def _prepare(self, batch: Batch, start: int, items: list[Any]) -> CallFuture | None:
        """The future of one chunk's job, not submitted yet; None when the chunk failed already (its place in the
        result holds the error)."""
        number = batch.submitted
        batch.submitted += 1
        shipped = self._shipped(batch)
        if shipped:  # the function and the rest of the call in a file of their own, pickled once
            call = (chunk_on_node.run_shipped_chunk, (*shipped, items, start), {})
        else:  # as they are: a chunk that cannot be pickled fails, naming what cannot be
            call = (chunk_on_node.run_chunk, (batch.function, items, start, batch.how, self.mode, self.initializer,
                                              self.initargs), {})
        try:
            future = self.executor.prepare_calls([call], label=batch.label)
        except pickle.PicklingError as e:  # the function, an item or the initializer cannot be sent
            batch.result.fail(start, start + len(items), self._unpicklable(batch, start, items, e))
            return None
        except Exception as e:  # noqa: BLE001 - e.g. the job's folder cannot be written
            batch.result.fail(start, start + len(items), e)
            return None
        meta = {"call": batch.label, "chunk": number, "start": start, "count": len(items)}
        self._chunks[id(future)] = _Chunk(batch, number, start, len(items), future, meta)
        future.add_done_callback(self._ended.put)
        return future

    def _shipped(self, batch: Batch) -> tuple[str, str] | tuple[()]:
        """The file (and its SHA-256) that holds the function, how, mode, initializer and initargs of a call of the
        pool, written into the work dir at its first chunk: a chunk names it instead of carrying them (a function
        of ``__main__`` goes by value: pickling it for every chunk was the front-end's largest cost per unchunked
        item; its bytes in every chunk, the queue's). Empty when they cannot be pickled."""
        if batch.shipped is None:
            try:
                data = pickling.dumps((batch.function, batch.how, self.mode, self.initializer, self.initargs))
                digest = sha256_hex(data)
                folder = self.packer.work_dir / "shipped"
                folder.mkdir(exist_ok=True)
                path = folder / f"{digest[:16]}.pkl"
                if not path.exists():
                    temporary = folder / f".{digest[:16]}.{os.getpid()}.tmp"
                    temporary.write_bytes(data)
                    os.replace(temporary, path)
                batch.shipped = (str(path), digest)
            except Exception:  # noqa: BLE001 - each chunk then fails naming what cannot be pickled
                batch.shipped = ()
        return batch.shipped

    def _unpicklable(self, batch: Batch, start: int, items: list[Any], error: Exception) -> pickle.PicklingError:
        """What of the call cannot be pickled, named as the caller wrote it: the function, an item or the
        initializer."""
        parts = [(f"the function {_name(batch.function)}", batch.function)]
        parts += [(f"item {start + offset} ({item!r:.80})", item) for offset, item in enumerate(items)]
        if self.initializer is not None:
            parts.append((f"the initializer {_name(self.initializer)} or its initargs",
                          (self.initializer, self.initargs)))
        what, reason = "the call", error.__cause__ or error
        for name, value in parts:
            try:
                pickling.dumps(value)
            except Exception as e:  # noqa: BLE001 - any reason counts
                what, reason = name, e
                break
        return pickle.PicklingError(f"b2batch pool: {what} of {batch.label} cannot be pickled to send it to a "
                                    f"job: {type(reason).__name__}: {reason}")

    # --- an ended job --------------------------------------------------------------------------------------

    def _handle(self, future: CallFuture) -> None:
        chunk = self._chunks.pop(id(future), None)
        if chunk is None:
            return
        batch, start, end = chunk.batch, chunk.start, chunk.start + chunk.count
        if future.cancelled():
            batch.result.fail(start, end, PoolTerminatedError(
                f"{batch.label}: the pool was terminated before items {start} to {end - 1} ended"))
            return
        job = future.job
        error = future.exception()
        if isinstance(error, CallJobError):
            self._lost(chunk, future, error)
            return
        raw = None
        if error is None:
            raw = future.result()[0]
            try:
                answer = pickle.loads(raw)
            except Exception as e:  # noqa: BLE001 - e.g. a value of a class this process cannot import
                error = pickle.UnpicklingError(f"{batch.label}: the values of items {start} to {end - 1} could "
                                               f"not be loaded here: {type(e).__name__}: {e}")
        if error is not None:  # the job could not run the chunk (e.g. the function failed to load)
            self._failed_job(chunk, future, error)
            return
        if batch.sizer is not None and getattr(answer, "seconds", None) is not None:
            batch.sizer.timed(len(answer.values), answer.seconds)
        if answer.values:
            batch.result.set_chunk(start, answer.values)
        if answer.error is not None:
            self.failed = True
            self._describe(answer.error, answer.traceback, start + (answer.index or 0), batch.label, job)
            self._mark_failed(job, f"item {start + (answer.index or 0)} raised {type(answer.error).__name__}: "
                                   f"{answer.error}")
            self.packer.pack(job, chunk.meta, raw, "failed", answer.traceback)  # written before the error is raised
            batch.result.fail(start + len(answer.values), end, answer.error)
            return
        if answer.failed:
            self.failed = True
            self._mark_failed(job, f"{len(answer.failed)} item(s) raised (their results are None): "
                                   f"{', '.join(str(start + i) for i in answer.failed[:10])}")
        self.packer.pack(job, chunk.meta, raw, "done")

    def _describe(self, error: BaseException, text: str, index: int, label: str, job: Any) -> None:
        error.__cause__ = RemoteTraceback(text) if text else error.__cause__
        error.add_note(f"Raised by item {index} of {label} (b2batch.Pool), in {job.system} job {job.job_id}; its "
                       f"stdout and stderr are packed in {self.packer.work_dir / OUTPUTS}")

    def _mark_failed(self, job: Any, reason: str) -> None:
        """The job ended, but not well for its items: so the record (progress, summary) says."""
        self.executor.run.record.update(job, "failed", reason)

    def _failed_job(self, chunk: _Chunk, future: CallFuture, error: BaseException) -> None:
        self.failed = True
        batch, start, end = chunk.batch, chunk.start, chunk.start + chunk.count
        text = error.__cause__.text if isinstance(error.__cause__, RemoteTraceback) else ""
        if self.mode != chunk_on_node.NONE:
            error.add_note(f"Items {start} to {end - 1} of {batch.label} (b2batch.Pool); the job's stdout and stderr are packed "
                           f"in {self.packer.work_dir / OUTPUTS}")
        self.packer.pack(future.job, chunk.meta, None, "failed", text or f"{type(error).__name__}: {error}")
        if self.mode == chunk_on_node.NONE:  # pypoolparty: the items of a chunk that did not run are None
            batch.result.set_chunk(start, [None] * chunk.count)
        else:  # after the packing: the error names the file
            batch.result.fail(start, end, error)

    def _lost(self, chunk: _Chunk, future: CallFuture, error: CallJobError) -> None:
        self.failed = True
        batch, start, end, job = chunk.batch, chunk.start, chunk.start + chunk.count, future.job
        limit = job.config["max_resubmissions"]
        lost = PoolJobLostError(
            f"Items {start} to {end - 1} of {batch.label}: their job ended without an answer after "
            f"{job.resubmissions} resubmission(s) (max_num_resubmissions={limit}); its stdout and stderr are "
            f"packed in {self.packer.work_dir / OUTPUTS}, its call in calls.pickles.\n{error}")
        self.packer.pack(job, chunk.meta, None, "lost", str(error))  # the error names the packed file: written first
        if self.mode == chunk_on_node.NONE:  # pypoolparty: the items of a chunk that never returned are None
            logger.warning("%s", lost)
            batch.result.set_chunk(start, [None] * chunk.count)
        else:
            batch.result.fail(start, end, lost)
