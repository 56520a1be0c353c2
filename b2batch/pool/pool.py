""":class:`Pool`: ``multiprocessing.Pool`` with a batch system behind it.

::

    with b2batch.Pool(batch_system="slurm", num_simultaneously_running_tasks=200) as pool:
        results = pool.map(sum, [[1, 2], [2, 3], [4, 5]])

The items are cut into chunks; each chunk runs as one job of the pool's
:class:`~b2batch.calls.Executor` (one engine run: bulk submission as job arrays, one status query per poll,
resubmission of jobs the batch system lost or killed). The function travels cloudpickled, so functions of
``__main__``, lambdas and closures work. Semantics are ``multiprocessing.Pool``'s: values in input order,
``chunksize``, an exception of the function raises in the caller with its type, the item's index and the
remote traceback. ``batch_system="multiprocessing"`` gives a real ``multiprocessing.Pool``.
"""

from __future__ import annotations

import itertools
import logging
import math
import os
import shutil
import sys
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from b2batch.jobscript import base_folder
from b2batch import systems
from b2batch.calls import Executor
from b2batch.calls.pack_sizing import PackSizer
from b2batch.engine.pilots.shaping_system import Feed
from b2batch.pool import environment, chunk_on_node
from b2batch.pool.dispatch import Batch, Dispatcher, chunks_of
from b2batch.pool.packing import Packer
from b2batch.pool.results import AsyncResult, ItemIterator, MapResult
from b2batch.errors import SettingError
from b2batch.settings import SETTINGS, get_setting

logger = logging.getLogger(__name__)

#: Slots assumed when neither a throttle nor the batch system says how many jobs run at once.
DEFAULT_SLOTS = 50
#: With ``chunksize=None`` a map is cut into at most this many chunks per slot (multiprocessing's 4).
CHUNKS_PER_SLOT = 4

_RUN, _CLOSE, _TERMINATE = "running", "closed", "terminated"


def _wants_multiprocessing(batch_system: Any, fallback: str | None) -> bool:
    if batch_system == "multiprocessing":
        return True
    return fallback == "multiprocessing" and batch_system == "auto" and systems.detect() == "local"


def _name_of(function: Callable[..., Any]) -> str:
    return getattr(function, "__qualname__", None) or getattr(function, "__name__", None) or type(function).__name__


def _new_folder(parent: Path, name: str) -> Path:
    """A new folder ``parent/name``, or ``name-2``, ``name-3`` ... when that is taken."""
    parent.mkdir(parents=True, exist_ok=True)
    for number in itertools.count(1):
        path = (parent / (name if number == 1 else f"{name}-{number}")).resolve()
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue
    raise AssertionError("unreachable")


def _check_settings(values: dict[str, Any], name: str) -> None:
    """Refuse a name in ``settings`` that is no b2batch setting, in one line with "did you mean"."""
    for key in values:
        if key in SETTINGS:
            continue
        import difflib
        import inspect

        own = [p for p in inspect.signature(Pool.__init__).parameters if p not in ("self", "settings")]
        close = difflib.get_close_matches(key, [*SETTINGS, *own], n=3, cutoff=0.75)
        hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        where = "b2batch.Pool" if name == "pool" else "the pypoolparty pool"
        raise SettingError(f"Unknown setting {key!r} in settings={{...}} given to {where}.{hint} Fix the name; the "
                           f"pool's own options are arguments ({', '.join(own)}), and settings takes b2batch "
                           f"settings: {', '.join(SETTINGS)}.")


class Pool:
    """A pool of jobs of one batch system, with ``multiprocessing.Pool``'s interface.

    ``processes`` (or ``num_simultaneously_running_tasks``, pypoolparty's name) is the throttle: at most
    that many jobs submitted and not ended. ``batch_system``: a b2batch batch system (``auto`` by default),
    or ``"multiprocessing"`` for a ``multiprocessing.Pool``; ``fallback="multiprocessing"`` gives one too
    when ``auto`` finds no batch system. ``settings``: b2batch settings for the jobs (``slurm_settings``,
    ``env``, ``env_script``, ``pilot_jobs`` ...). pypoolparty's arguments: ``python_path`` (default: this
    interpreter), ``polling_interval`` (seconds between status queries, fixed; default: the settings
    ``poll_interval`` to ``max_poll_interval``), ``work_dir`` (the folder in which the pool makes its own
    work dir; default: the setting ``task_file_dir``), ``keep_work_dir`` (it is kept anyway when an item
    failed, a job was lost or wrote to stderr), ``verbose`` (progress and a summary; default: a live
    progress table when stderr is a terminal), ``max_num_resubmissions`` (jobs killed or lost are submitted
    again up to this many times; default: the setting ``max_resubmissions``), ``slurm_call_timeout``
    (seconds each scheduler command may take, on any batch system: the setting ``scheduler_call_timeout``). ``task_errors="none"``: pypoolparty's handling of
    an item that raised (its value is None, the traceback goes to the job's stderr) instead of raising.
    The caller's environment is exported into the jobs (:mod:`b2batch.pool.environment`).
    """

    def __new__(cls, processes: int | None = None, initializer: Callable[..., Any] | None = None,
                initargs: Iterable[Any] = (), maxtasksperchild: int | None = None, **options: Any) -> Any:
        if _wants_multiprocessing(options.get("batch_system", "auto"), options.get("fallback")):
            import multiprocessing

            return multiprocessing.Pool(processes, initializer, tuple(initargs), maxtasksperchild)
        return super().__new__(cls)

    def __init__(self, processes: int | None = None, initializer: Callable[..., Any] | None = None,
                 initargs: Iterable[Any] = (), maxtasksperchild: int | None = None, *, batch_system: Any = "auto",
                 num_simultaneously_running_tasks: int | None = None, python_path: str | None = None,
                 polling_interval: float | None = None, work_dir: str | os.PathLike[str] | None = None,
                 keep_work_dir: bool = False, verbose: bool | None = None, slurm_call_timeout: float | None = None,
                 max_num_resubmissions: int | None = None, settings: dict[str, Any] | None = None,
                 fallback: str | None = None, task_errors: str = chunk_on_node.RAISE, name: str = "pool",
                 folder: str | None = None) -> None:
        if task_errors not in (chunk_on_node.RAISE, chunk_on_node.NONE):
            raise ValueError(f"task_errors must be {chunk_on_node.RAISE!r} or {chunk_on_node.NONE!r}, not {task_errors!r}")
        throttle = num_simultaneously_running_tasks if num_simultaneously_running_tasks is not None else processes
        if throttle is not None and throttle < 1:
            raise ValueError("Number of processes must be at least 1")
        self.throttle = throttle
        self.keep_work_dir = bool(keep_work_dir)
        self.slurm_call_timeout = slurm_call_timeout
        _check_settings(dict(settings or {}), name)
        parent = Path(work_dir) if work_dir is not None else base_folder.resolve(get_setting("task_file_dir"))
        self.work_dir = _new_folder(parent, folder or f"{name}-{time.strftime('%Y%m%d-%H%M%S')}-{os.urandom(3).hex()}")
        values = dict(settings or {})
        values["env"] = environment.exported(extra=values.get("env", get_setting("env")))
        values.setdefault("resubmit_failed_tasks", True)  # a job that exited non-zero was killed: see runner
        values["task_file_dir"] = str(self.work_dir)  # array folders go into the work dir too
        if max_num_resubmissions is not None:
            values["max_resubmissions"] = int(max_num_resubmissions)
        if python_path is not None:
            values["executable"] = [str(python_path)]
        if slurm_call_timeout is not None:  # every scheduler command's, whichever the batch system
            values["scheduler_call_timeout"] = float(slurm_call_timeout)
        if polling_interval is not None:
            values["poll_interval"] = values["max_poll_interval"] = float(polling_interval)
        try:
            # preload: a pilot imports the chunks' runner once, not each unit's child (a trivial unit: 28 -> 5 ms CPU)
            # feed: the chunks of a map not handed over yet count as ready for the run's job shaping
            # unit_logs auto: a chunk in a pilot writes into its pilot's logs (the packer reads its part into
            # outputs.jsonl, as it read and removed a chunk's own log files): no log folder per chunk
            # warm: local pilots start now, as multiprocessing.Pool's processes do (none on a cluster)
            self.executor = Executor(batch_system, name=name, work_dir=self.work_dir, settings=values,
                                     max_in_flight=throttle, keep_work_dir=True, preload=[chunk_on_node.__name__],
                                     feed=Feed(0, self._held), unit_logs="pilot", warm=True)
        except BaseException:
            shutil.rmtree(self.work_dir, ignore_errors=True)
            raise
        self.record = self.executor.run.record
        self.slots = throttle or self._system_slots()
        window = 2 * throttle if throttle else self.executor.config["max_array_size"]
        self.packer = Packer(self.work_dir)
        self._dispatcher = Dispatcher(self.executor, self.packer, window, task_errors, initializer,
                                      tuple(initargs))
        self._state = _RUN
        self._progress, self._report = self._show(verbose)
        self._live = None
        if get_setting("live_state", task=self.executor.settings):  # for b2batch monitor
            from b2batch.engine.livestate import start_live_state

            self._live = start_live_state(self.record, self.executor.log_dir, self.executor.run.tag,
                                          {"front_end": "pool", "script": sys.argv[0] if sys.argv else None,
                                           "argv": list(sys.argv[1:])})
        self._ending = _Ending(self)
        self._finalizer = weakref.finalize(self, self._ending, True)

    def _held(self) -> int:
        dispatcher = getattr(self, "_dispatcher", None)
        return dispatcher.held() if dispatcher is not None else 0

    def _system_slots(self) -> int:
        if self.executor.system == "local":
            return get_setting("local_slots", task=self.executor.settings) or os.cpu_count() or 1
        return DEFAULT_SLOTS

    def _show(self, verbose: bool | None) -> tuple[Any, Any]:
        if verbose is False:
            return None, None
        from b2batch.display.progress import Progress, _is_terminal

        if verbose is None and not _is_terminal(sys.stderr):
            return None, None
        progress = Progress(self.record)
        progress.start()
        report = None
        if verbose:  # (the report's modules only then: a Pool's start counts)
            from b2batch.display.report import RunReport

            report = RunReport(run=self.record, mode="batch")
            report.__enter__()
        return progress, report

    def __repr__(self) -> str:
        return f"<b2batch.Pool state={self._state} system={self.executor.system} work_dir={self.work_dir}>"

    # --- calls -----------------------------------------------------------------------------------------

    def _check_running(self) -> None:
        if self._state != _RUN:
            raise ValueError("Pool not running")

    def _chunksize(self, count: int | None, chunksize: int | None) -> int:
        if chunksize is not None:
            if chunksize < 1:
                raise ValueError(f"Chunksize must be 1+, not {chunksize:n}")
            return int(chunksize)
        if count is None:
            return 1
        return max(1, math.ceil(count / (CHUNKS_PER_SLOT * self.slots)))

    def _add(self, batch: Batch) -> None:
        self._check_running()
        self._dispatcher.add(batch)

    def apply_async(self, func: Callable[..., Any], args: Iterable[Any] = (), kwds: dict[str, Any] | None = None,
                    callback: Callable[[Any], object] | None = None,
                    error_callback: Callable[[BaseException], object] | None = None) -> AsyncResult:
        """``func(*args, **kwds)`` in a job."""
        result = AsyncResult(callback, error_callback)
        self._add(Batch(f"apply({_name_of(func)})", func, "call", result,
                        chunks_of([(tuple(args), dict(kwds or {}))], 1), length=1))
        return result

    def apply(self, func: Callable[..., Any], args: Iterable[Any] = (), kwds: dict[str, Any] | None = None) -> Any:
        return self.apply_async(func, args, kwds).get()

    def _map_async(self, kind: str, how: str, func: Callable[..., Any], iterable: Iterable[Any],
                   chunksize: int | None, callback: Any, error_callback: Any) -> MapResult:
        self._check_running()
        items = list(iterable)
        size = self._chunksize(len(items), chunksize)
        result = MapResult(callback, error_callback)
        self._add(Batch(f"{kind}({_name_of(func)})", func, how, result, chunks_of(items, size), length=len(items),
                        size=size))
        return result

    def map_async(self, func: Callable[..., Any], iterable: Iterable[Any], chunksize: int | None = None,
                  callback: Callable[[Any], object] | None = None,
                  error_callback: Callable[[BaseException], object] | None = None) -> MapResult:
        return self._map_async("map", "one", func, iterable, chunksize, callback, error_callback)

    def map(self, func: Callable[..., Any], iterable: Iterable[Any], chunksize: int | None = None) -> list[Any]:
        """``[func(item) for item in iterable]``, in jobs."""
        return self.map_async(func, iterable, chunksize).get()

    def starmap_async(self, func: Callable[..., Any], iterable: Iterable[Iterable[Any]], chunksize: int | None = None,
                      callback: Callable[[Any], object] | None = None,
                      error_callback: Callable[[BaseException], object] | None = None) -> MapResult:
        return self._map_async("starmap", "star", func, iterable, chunksize, callback, error_callback)

    def starmap(self, func: Callable[..., Any], iterable: Iterable[Iterable[Any]],
                chunksize: int | None = None) -> list[Any]:
        """``[func(*args) for args in iterable]``, in jobs."""
        return self.starmap_async(func, iterable, chunksize).get()

    def _imap(self, ordered: bool, func: Callable[..., Any], iterable: Iterable[Any],
              chunksize: int | None) -> Iterator[Any]:
        self._check_running()
        count = len(iterable) if hasattr(iterable, "__len__") else None  # type: ignore[arg-type]
        result = ItemIterator(ordered)
        kind = "imap" if ordered else "imap_unordered"
        if count is None and chunksize is None:  # no length to cut by: chunks sized by the items' measured time
            sizer = PackSizer()
            self._add(Batch(f"{kind}({_name_of(func)})", func, "one", result, chunks_of(iterable, sizer.next_size),
                            sizer=sizer))
            return result
        size = self._chunksize(count, chunksize)
        self._add(Batch(f"{kind}({_name_of(func)})", func, "one", result, chunks_of(iterable, size)))
        return result

    def imap(self, func: Callable[..., Any], iterable: Iterable[Any], chunksize: int | None = None) -> Iterator[Any]:
        """The values one by one, in input order; the input is read as jobs are submitted."""
        return self._imap(True, func, iterable, chunksize)

    def imap_unordered(self, func: Callable[..., Any], iterable: Iterable[Any],
                       chunksize: int | None = None) -> Iterator[Any]:
        """The values one by one, as their jobs end."""
        return self._imap(False, func, iterable, chunksize)

    # --- the end ---------------------------------------------------------------------------------------

    def close(self) -> None:
        """No more calls; the jobs of those made run on."""
        if self._state == _RUN:
            self._state = _CLOSE
            self._dispatcher.close()

    def terminate(self) -> None:
        """Cancel every job not ended; results not ready fail with PoolTerminatedError."""
        self._state = _TERMINATE
        self._finalizer.detach()
        self._ending(terminate=True)

    def join(self) -> None:
        """Wait until every call ended (after :meth:`close` or :meth:`terminate`)."""
        if self._state == _RUN:
            raise ValueError("Pool is still running")
        self._finalizer.detach()
        self._ending(terminate=False)

    def __enter__(self) -> Pool:
        self._check_running()
        return self

    def __exit__(self, exc_type: Any, *rest: Any) -> None:
        """Every call ended: close and join (the work dir goes unless kept); else terminate."""
        if exc_type is None and self._state != _TERMINATE and not self._dispatcher.busy():
            self.close()
            self.join()
        else:
            self.terminate()



class _Ending:
    """What ends a pool: its jobs cancelled (terminate) or waited for, its display stopped, its work dir removed
    unless kept. It holds no reference to the pool, so that it also ends a pool dropped without ``close``
    (garbage-collected, or still there when the interpreter exits), as ``multiprocessing.Pool`` does."""

    def __init__(self, pool: Pool) -> None:
        self.dispatcher, self.executor, self.packer = pool._dispatcher, pool.executor, pool.packer
        self.work_dir, self.keep_work_dir = pool.work_dir, pool.keep_work_dir
        self.progress, self.report, self.live = pool._progress, pool._report, pool._live
        self.ended = False

    def __call__(self, terminate: bool) -> None:
        if terminate:
            self.dispatcher.terminate()
        else:
            self.dispatcher.close()
        self.dispatcher.join()
        # Not shutdown(cancel_futures=True): the dispatcher cancelled the futures itself, because the
        # executor's cancel-all loops for ever on a future that is cancelled twice.
        self.executor.shutdown(wait=True)
        if self.ended:
            return
        self.ended = True
        self.packer.close()
        if self.progress is not None:
            self.progress.stop()
        if self.report is not None:
            self.report.__exit__(None, None, None)
        if self.live is not None:
            self.live.stop("terminated" if terminate else "an item failed or a job was lost"
                           if self.dispatcher.failed else "success")
        reasons = [why for why, yes in (("keep_work_dir is set", self.keep_work_dir),
                                        ("an item failed or a job was lost", self.dispatcher.failed),
                                        ("a job wrote to stderr", self.packer.wrote_stderr)) if yes]
        if reasons:
            log = logger.warning if self.dispatcher.failed else logger.info
            log("b2batch pool: the work dir is kept (%s): %s", "; ".join(reasons), self.work_dir)
        else:
            shutil.rmtree(self.work_dir, ignore_errors=True)
