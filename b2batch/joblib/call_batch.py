""":class:`CallBatch`: the jobs of one ``Parallel`` call on the engine, in joblib-htcondor's terms a *batch*.

joblib hands the backend its batches of calls one at a time; each gets a future at once. The batch's
dispatcher thread puts them into *units*, each one job (or one unit in a pilot job) of an
:class:`~b2batch.calls.Executor`, within the throttle:

- the throttle counts the units submitted and not ended, or with ``delete_task_file_on_load`` only those
  whose task file was not loaded yet (as joblib-htcondor counts queued jobs only);
- a unit holds one of joblib's batches, or ``batch_size`` calls when that is a number; in pilot mode with
  ``batch_size="auto"`` it holds batches until they make :data:`UNIT_SECONDS` of work, timed inside the jobs
  (not counting the jobs' start-up, which is what makes joblib's own automatic batch size useless here). Until
  the first unit has been timed only :data:`PROBE_UNITS` go out, one batch each; a probe that runs longer than
  :data:`LONG_PROBE_SECONDS` ends the probing at once (long calls: one batch per unit).

The task files go to ``shared_data_dir/<batch>/`` and that folder is removed when the call ends; the jobs'
logs go to ``log_dir_prefix`` (kept), or to ``<log_dir>/joblib/<batch>/``, removed when every call succeeded
and wrote nothing to stderr.
"""

from __future__ import annotations

import collections
import concurrent.futures
import logging
import math
import pickle
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from b2batch.calls import CallFuture, Executor, RemoteTraceback, pickling
from b2batch.engine import RunRecord
from b2batch.engine.pilots.shaping_system import Feed
from b2batch.joblib.batches_on_node import BatchesRaised, BatchOutcome, run_batches

logger = logging.getLogger(__name__)

#: Seconds of work a unit is filled up to (pilot mode, batch_size "auto"): a pilot's cost per unit (a fork, a
#: few small files) is a few percent of it.
UNIT_SECONDS = 0.5
#: Units that go out, one batch each, before the first one has been timed.
PROBE_UNITS = 4
#: Seconds a probe may be seen running before its calls count as long (no coalescing) without waiting for its
#: end: well above the few tenths of a second between a unit's claim and the steering process seeing its end.
LONG_PROBE_SECONDS = 5.0
#: Most bytes of pickled batches in one unit, and most batches.
MAX_UNIT_BYTES = 64 * 1024 * 1024
MAX_UNIT_BATCHES = 10_000
#: Longest pause of the dispatcher thread when nothing wakes it.
TICK = 0.2
#: Most calls waiting here for a unit that the dispatcher asks joblib for ahead (n_jobs=-1; see
#: :meth:`CallBatch._ask_ahead`): what the steering process holds of tiny calls stays bounded.
MAX_WAITING_CALLS = 100_000


@dataclass(eq=False)
class Pending:
    """One of joblib's batches, waiting for a unit."""

    batch: Any
    future: concurrent.futures.Future
    calls: int
    #: The place of its first call in the Parallel call (joblib hands batches over in the input's order).
    position: int = 0
    payload: bytes | None = None


@dataclass(eq=False)
class Unit:
    members: list[Pending]
    probe: bool
    future: CallFuture | None = None
    loaded: bool = False  # its task file was loaded (and deleted) by the job
    started: float = field(default_factory=time.monotonic)


class CallBatch:
    """The units of one Parallel call: submitted within the throttle, their outcomes handed to joblib."""

    def __init__(self, *, name: str, system: str, settings: dict[str, Any], folder: Path, log_folder: Path,
                 keep_logs: bool, level: int, throttle: int | None, batch_size: int | str, coalesce: bool,
                 delete_task_file_on_load: bool, log_level: int, context_func: Any, record: RunRecord,
                 window: int = 0, frontend: str = "the joblib backend b2batch",
                 more: Callable[[], bool] | None = None) -> None:
        self.name = name
        #: How messages name this front-end.
        self.frontend = frontend
        #: Calls handed over so far: the place in the Parallel call of the next batch's first call.
        self.positions = 0
        self.folder = folder
        self.log_folder = log_folder
        self.keep_logs = keep_logs
        self.level = level
        self.throttle = throttle
        self.batch_size = batch_size
        self.coalesce = coalesce
        self.delete_task_file_on_load = delete_task_file_on_load
        self.log_level = log_level
        self.context_func = context_func
        #: Asks the caller (joblib) for its next batch, handed to :meth:`submit`; False when it has none left.
        self.more = more
        #: Seconds per call as timed in the jobs (None until a unit ended, or a probe ran long).
        self.per_call: float | None = None
        self.failed = False
        self._pending: collections.deque[Pending] = collections.deque()
        self._units: dict[int, Unit] = {}  # id(unit) -> unit, submitted and not ended
        #: The call's functions, each pickled once for all its batches (b2batch.calls.pickling.dumps).
        self._shipped: dict[int, tuple[Any, bytes]] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = False
        self.executor = Executor(system, name=name, work_dir=folder, settings=settings, log_dir=log_folder,
                                 delete_call_file_on_load=delete_task_file_on_load, record=record,
                                 preload=["b2batch.joblib.batches_on_node"], keep_work_dir=False,
                                 feed=Feed(window, self._held))
        self._thread = threading.Thread(target=self._loop, name=f"b2batch-{name}-dispatch", daemon=True)
        self._thread.start()

    # --- joblib's side ------------------------------------------------------------------------------

    def submit(self, batch: Any) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        calls = max(1, len(batch) if hasattr(batch, "__len__") else 1)
        self._pending.append(Pending(batch, future, calls, self.positions))
        self.positions += calls
        self._wake.set()
        return future

    def close(self, cancel: bool = False) -> None:
        """End the call: with ``cancel``, what waits or runs is dropped (its jobs cancelled); else wait for it.
        Then the batch's folder is removed, and its logs unless kept."""
        self._stopping = True
        self._wake.set()
        self._thread.join()
        if cancel:
            while self._pending:
                self._pending.popleft().future.cancel()
        self.executor.shutdown(wait=True, cancel_futures=cancel)
        with self._lock:
            for unit in self._units.values():
                for member in unit.members:
                    member.future.cancel()
            self._units.clear()
        self._tidy_logs()

    def _held(self) -> int:
        """The units the batches that wait here would make (the engine's shaping rule counts them as ready):
        one per batch, or packed into units of UNIT_SECONDS once the calls are timed."""
        pending = list(self._pending)
        if not (self.coalesce and self.per_call) or isinstance(self.batch_size, int):
            return len(pending)
        return math.ceil(sum(m.calls for m in pending) * self.per_call / UNIT_SECONDS)

    # --- the dispatcher thread ----------------------------------------------------------------------

    def _loop(self) -> None:
        try:
            while not self._stopping:
                self._wake.wait(TICK)
                self._wake.clear()
                self._release()
        except BaseException as e:  # nothing may wait for ever on a batch of a dead thread
            logger.exception("%s: the dispatcher stopped", self.name)
            while self._pending:
                _fail(self._pending.popleft().future, e)

    def _release(self) -> None:
        """Submit units while batches wait and the throttle has room."""
        self._ask_ahead()
        room = self._room()
        while self._pending and room > 0 and not self._stopping:
            probing = self.coalesce and self._still_probing()
            if probing and sum(1 for u in list(self._units.values()) if u.probe) >= PROBE_UNITS:
                return
            members = self._take(single=probing)
            if members:
                self._submit(Unit(members, probe=probing))
                room -= 1

    def _ask_ahead(self) -> None:
        """With n_jobs=-1, joblib hands over a new batch only as one ends, which keeps few calls out where they are
        tiny (its window counts batches): ask it for more (``more``) until the batches that wait here make the
        units the throttle has room for, at most MAX_WAITING_CALLS calls and MAX_UNIT_BATCHES batches. Units are
        of ``batch_size`` calls, of a batch each, or once the calls are timed of UNIT_SECONDS of them; nothing
        is asked for while the probes run."""
        if self.more is None:
            return
        if isinstance(self.batch_size, int):
            per_unit = self.batch_size
        elif not self.coalesce:
            per_unit = 0  # a batch each
        elif self.per_call is None:
            return  # probing: joblib's own first batches are plenty
        else:
            per_unit = max(1, int(UNIT_SECONDS / self.per_call))
        pending = list(self._pending)
        batches, calls = len(pending), sum(member.calls for member in pending)
        wanted = max(1, min(self._room(), MAX_UNIT_BATCHES))
        while ((calls // per_unit if per_unit else batches) < wanted and calls < MAX_WAITING_CALLS
               and batches < MAX_UNIT_BATCHES and not self._stopping):
            if not self.more():
                self.more = None  # its input is used up
                return
            if len(self._pending) > batches:
                batches, calls = batches + 1, calls + self._pending[-1].calls

    def _room(self) -> float:
        if self.throttle is None:
            return math.inf
        units = list(self._units.values())
        if not self.delete_task_file_on_load:
            return self.throttle - len(units)
        queued = 0
        for unit in units:
            if not unit.loaded and unit.future is not None:
                job = unit.future.job
                if job.inline is not None:  # its calls ride in a pilot's entry (no file): loaded once it runs
                    seen = self.executor.run.record.jobs.get(job.key)
                    unit.loaded = seen is not None and seen.started_at is not None
                else:
                    unit.loaded = not (job.files.folder / "call.pkl").exists()
            queued += not unit.loaded
        return self.throttle - queued

    def _still_probing(self) -> bool:
        """Whether no unit has been timed yet; a probe running longer than UNIT_SECONDS times the calls."""
        if self.per_call is not None:
            return False
        record = self.executor.run.record
        now = time.time()
        for unit in list(self._units.values()):
            job = record.jobs.get(unit.future.job.key) if unit.future is not None else None
            if job is not None and job.started_at and now - job.started_at > LONG_PROBE_SECONDS:
                self.per_call = (now - job.started_at) / sum(m.calls for m in unit.members)
                logger.debug("%s: a probe has run for %.1f s; no coalescing", self.name, now - job.started_at)
                return False
        return True

    def _take(self, single: bool) -> list[Pending]:
        """The batches of the next unit, pickled; one that cannot be pickled fails at once."""
        members: list[Pending] = []
        size = calls = 0
        while self._pending:
            member = self._pending.popleft()
            if member.payload is None:
                try:
                    member.payload = pickling.dumps(member.batch, shipped=self._shipped)
                except Exception as e:
                    _fail(member.future, self._unpicklable(member, e))
                    continue
            if members and (size + len(member.payload) > MAX_UNIT_BYTES or len(members) >= MAX_UNIT_BATCHES):
                self._pending.appendleft(member)
                break
            members.append(member)
            size += len(member.payload)
            calls += member.calls
            if single or self._full(calls):
                break
        return members

    def _unpicklable(self, member: Pending, error: Exception) -> pickle.PicklingError:
        """The error for a batch that cannot be pickled, naming the call (its place in the Parallel call)."""
        index, reason = 0, error
        for index, item in enumerate(getattr(member.batch, "items", None) or []):
            try:
                pickling.dumps(item)
            except Exception as e:  # noqa: BLE001 - any reason counts
                reason = e
                break
        return pickle.PicklingError(
            f"{self.frontend}: call {member.position + index} of this Parallel call ({_label(member.batch, index)}) "
            f"cannot be pickled to send it to a job (its function or an argument): {type(reason).__name__}: "
            f"{reason}")

    def _full(self, calls: int) -> bool:
        if isinstance(self.batch_size, int):
            return calls >= self.batch_size
        if not self.coalesce:
            return True
        return self.per_call is not None and calls * self.per_call >= UNIT_SECONDS

    def _submit(self, unit: Unit) -> None:
        payloads = [m.payload for m in unit.members]
        first = unit.members[0].batch
        label = _label(first)
        call = (run_batches, (payloads, self.level + 1, self.log_level, self.context_func), {})
        for member in unit.members:
            member.batch = member.payload = None  # the pickled form is in the task file now
        logger.debug("%s: a unit of %d batch(es), %d call(s)%s; %.3g s per call so far", self.name,
                     len(unit.members), sum(m.calls for m in unit.members), " (a probe)" if unit.probe else "",
                     self.per_call or 0.0)
        try:
            unit.future = self.executor.submit_calls([call], label=label)
        except BaseException as e:
            for member in unit.members:
                _fail(member.future, e)
            return
        with self._lock:
            self._units[id(unit)] = unit
        unit.future.add_done_callback(lambda future, unit=unit: self._ended(unit, future))

    # --- a unit ended (the executor's thread) -------------------------------------------------------

    def _ended(self, unit: Unit, future: concurrent.futures.Future) -> None:
        with self._lock:
            self._units.pop(id(unit), None)
        if future.cancelled():
            for member in unit.members:
                member.future.cancel()
            return
        error = future.exception()
        outcomes: list[BatchOutcome] | None = None
        if error is None:
            outcomes = future.result()[0]
        elif isinstance(error, BatchesRaised):
            outcomes = error.outcomes
        if outcomes is not None and len(outcomes) == len(unit.members):
            self._time(outcomes)
            assert isinstance(future, CallFuture)
            job = future.job
            for member, outcome in zip(unit.members, outcomes):
                if outcome.error is None:
                    member.future.set_result(outcome.value)
                    continue
                self.failed = True
                outcome.error.__cause__ = RemoteTraceback(outcome.traceback)
                outcome.error.add_note(self._where(member, outcome.index, job))
                _fail(member.future, outcome.error)
        else:
            self.failed = True
            for member in unit.members:
                failure = error or RuntimeError(f"{self.name}: a unit gave no outcome per batch")
                if isinstance(future, CallFuture):
                    failure.add_note(self._where(member, None, future.job))
                _fail(member.future, failure)
        self._wake.set()

    def _where(self, member: Pending, index: int | None, job: Any) -> str:
        """Which call it was (its place in the Parallel call), in which front-end, job and log files."""
        if index is not None:
            which = f"call {member.position + index} of this Parallel call"
        elif member.calls == 1:
            which = f"call {member.position} of this Parallel call"
        else:
            which = f"calls {member.position} to {member.position + member.calls - 1} of this Parallel call"
        return (f"Raised by {which}, in {self.frontend}: {job.system} job {job.job_id} (stdout: {job.files.stdout}, "
                f"stderr: {job.files.stderr})")

    def _time(self, outcomes: list[BatchOutcome]) -> None:
        calls = sum(o.calls for o in outcomes)
        if not calls:
            return
        seconds = sum(o.seconds for o in outcomes) / calls
        self.per_call = seconds if self.per_call is None else 0.7 * self.per_call + 0.3 * seconds

    # --- the end --------------------------------------------------------------------------------------

    def _tidy_logs(self) -> None:
        if self.keep_logs or self.failed:
            return
        try:
            if any(p.stat().st_size for p in self.log_folder.glob("*/stderr")):
                logger.info("%s: some calls wrote to stderr; their logs are kept in %s", self.name,
                            self.log_folder)
                return
        except OSError:
            return
        shutil.rmtree(self.log_folder, ignore_errors=True)


def _label(batch: Any, index: int = 0) -> str:
    """The name of the first call's function (or the ``index``-th's), for the progress display and messages."""
    try:
        function = batch.items[index][0]
        return str(getattr(function, "__name__", None) or getattr(getattr(function, "func", None), "__name__", "joblib"))
    except (AttributeError, IndexError, TypeError):
        return "joblib"


def _fail(future: concurrent.futures.Future, error: BaseException) -> None:
    if not future.done():
        try:
            future.set_exception(error)
        except concurrent.futures.InvalidStateError:
            pass
