""":class:`B2BatchBackend`: joblib's ``ParallelBackendBase`` on b2batch's engine, for every batch system.

joblib drives a backend through a small protocol (``joblib/_parallel_backends.py``): ``configure`` once per
``Parallel`` (or per ``with Parallel(...)`` block), ``start_call``/``stop_call`` around each call, ``submit`` for
each of its batches (a future whose done-callback joblib passes in), ``retrieve_result_callback`` to read a
finished future, ``abort_everything`` on the first error, ``get_nested_backend`` for the ``Parallel`` calls
made inside the calls. Each call's batches run as a :class:`~b2batch.joblib.call_batch.CallBatch`.
"""

from __future__ import annotations

import logging
import signal
import threading
import uuid
from pathlib import Path
from typing import Any

from joblib.parallel import ParallelBackendBase, SequentialBackend

from b2batch.errors import B2BatchError
from b2batch.joblib import options as opts
from b2batch.joblib.options import JOBLIB_N_JOBS
from b2batch.joblib.batches_on_node import current_level

logger = logging.getLogger(__name__)

#: The parameters of joblib-htcondor (and b2batch's own), in the order of the constructor.
PARAMETERS = ("batch_system", "request_cpus", "request_memory", "request_disk", "universe", "pool", "schedd",
              "python_path", "initial_dir", "extra_directives", "log_dir_prefix", "poll_interval", "shared_data_dir",
              "delete_task_file_on_load", "worker_log_level", "throttle", "batch_size", "max_recursion_level",
              "export_metadata", "context_func", "progress")


class NestingError(B2BatchError, RuntimeError):
    """A ``Parallel`` call inside a job asked for the backend beyond ``max_recursion_level``."""


class B2BatchBackend(ParallelBackendBase):
    """Runs joblib's calls as jobs of a batch system: ``parallel_config(backend="b2batch", ...)``.

    Every parameter is optional (joblib builds the backend without arguments too). ``batch_system`` defaults to
    the setting ``batch_system``; joblib-htcondor's parameters keep their names and meanings (see
    :mod:`b2batch.joblib.options`), and any other b2batch setting may be given by name.
    """

    supports_retrieve_callback = True
    supports_inner_max_num_threads = False
    supports_sharedmem = False
    uses_threads = False
    #: ``Parallel(backend="b2batch")`` without ``n_jobs`` dispatches everything (within the throttle).
    default_n_jobs = -1
    #: Where task files go when ``shared_data_dir`` is not given (relative: to the settings' base folder).
    default_shared_data_dir: str | None = None
    #: How messages name this front-end.
    frontend_name = "the joblib backend b2batch"

    def __init__(self, nesting_level: int | None = None, inner_max_num_threads: int | None = None,
                 **parameters: Any) -> None:
        super().__init__(nesting_level=nesting_level, inner_max_num_threads=inner_max_num_threads)
        #: Levels of jobs of this backend above this one (joblib's nesting_level counts threads too).
        self._recursion_level: int | None = parameters.pop("_recursion_level", None)
        known = {k: parameters.pop(k) for k in PARAMETERS if k in parameters}
        settings = dict(parameters.pop("settings", None) or {})
        settings.update(parameters)  # the rest: b2batch settings by name (checked below)
        self.options = opts.Options(**known, settings=settings)
        self.options.check()
        self._parameters = {**known, **({"settings": settings} if settings else {})}
        self.n_jobs_requested = -1
        self.parallel: Any = None
        self._batch: Any = None
        self._aborted = False
        self._nested: tuple[ParallelBackendBase, int | None] | None = None
        self._signals: dict[int, Any] = {}

    # --- pickling: a backend travels with every batch (the nested backend); its state stays behind -------

    def __reduce__(self) -> tuple[Any, ...]:
        parameters = {**self._parameters, "_recursion_level": self._recursion_level}
        return (_rebuild, (type(self), parameters, self.nesting_level, self.n_jobs_requested))

    @property
    def level(self) -> int:
        """This backend's recursion level: 0 in the caller, 1 in the jobs of its calls, and so on (a backend made
        in a job knows it from ``$B2BATCH_JOBLIB_LEVEL``)."""
        return max(self._recursion_level or 0, current_level())

    # --- joblib's protocol ------------------------------------------------------------------------------

    def effective_n_jobs(self, n_jobs: int | None) -> int:
        """The workers joblib cuts its batches for and keeps twice as many batches out for: ``n_jobs``, or for a
        negative one (or None: everything, within the throttle) :data:`~b2batch.joblib.options.JOBLIB_N_JOBS`,
        the call then asking for more batches itself (:meth:`one_more_batch`)."""
        if n_jobs == 0:
            raise ValueError("n_jobs == 0 in Parallel has no meaning")
        if n_jobs is None or n_jobs < 0:
            return JOBLIB_N_JOBS
        return int(n_jobs)

    def configure(self, n_jobs: int = -1, parallel: Any = None, prefer: Any = None, require: Any = None,
                  **backend_kwargs: Any) -> int:
        limit = self.options.max_recursion_level
        if limit != -1 and self.level > limit:
            raise NestingError(
                f"A Parallel call with the b2batch backend at nesting level {self.level} (inside a job of a call at "
                f"level {self.level - 1}) goes beyond max_recursion_level={limit}. Nested Parallel calls that use "
                f"the default backend run one after another in the job; to run this one as jobs too, set "
                f"max_recursion_level={self.level} (or -1, no limit) where the outermost Parallel is configured.")
        self.parallel = parallel
        self._nested = None
        self.n_jobs_requested = -1 if n_jobs is None else int(n_jobs)
        return self.effective_n_jobs(n_jobs)

    def compute_batch_size(self) -> int:
        """Calls per batch when joblib's ``batch_size`` is "auto": ``batch_size`` if a number, else as many as
        fill :data:`~b2batch.joblib.call_batch.UNIT_SECONDS` by the calls' time in the jobs (1 until it is known)."""
        if isinstance(self.options.batch_size, int):
            return self.options.batch_size
        from b2batch.joblib.call_batch import UNIT_SECONDS

        per_call = self._batch.per_call if self._batch is not None else None
        if not per_call or not self._batch.coalesce:
            return 1
        return max(1, min(10_000, int(UNIT_SECONDS / per_call)))

    def batch_completed(self, batch_size: int, duration: float) -> None:
        """joblib's timing includes the job's start-up; the batch's own timing comes from the jobs instead."""

    def start_call(self) -> None:
        from b2batch.joblib.parallel_run import start_batch

        self._aborted = False
        self._nested = None
        self._batch = start_batch(self)
        self._catch_sigterm()

    def stop_call(self) -> None:
        batch, self._batch = self._batch, None
        try:
            if batch is not None:
                from b2batch.joblib.parallel_run import stop_batch

                stop_batch(batch, cancel=self._aborted)
        finally:
            self._release_sigterm()

    def submit(self, func: Any, callback: Any = None) -> Any:
        if self._batch is None:  # joblib calls start_call first; a direct use of the backend may not
            self.start_call()
        future = self._batch.submit(func)
        if callback is not None:
            future.add_done_callback(callback)
        return future

    def one_more_batch(self) -> bool:
        """Have joblib dispatch its next batch to :meth:`submit` now, as its own callback does when a batch ended
        (under its lock, while its input lasts); False when there is none left or the call is being aborted.
        joblib's private names stay here (``tests/calls/test_joblib_backend.py`` checks that joblib has them)."""
        parallel = self.parallel
        lock = getattr(parallel, "_lock", None)
        if lock is None:
            return False
        with lock:
            if getattr(parallel, "_original_iterator", None) is None or getattr(parallel, "_aborting", True):
                return False
            parallel.dispatch_next()
        return True

    def retrieve_result_callback(self, future: Any) -> Any:
        return future.result()

    def abort_everything(self, ensure_ready: bool = True) -> None:
        """Cancel what waits and runs (its jobs too); ``ensure_ready``: the next call starts afresh."""
        self._aborted = True
        batch, self._batch = self._batch, None
        if batch is not None:
            from b2batch.joblib.parallel_run import stop_batch

            stop_batch(batch, cancel=True)

    def terminate(self) -> None:
        if self._batch is not None:
            self.abort_everything(ensure_ready=False)

    def get_nested_backend(self) -> tuple[ParallelBackendBase, int | None]:
        """The backend of ``Parallel`` calls inside the calls: this one a level deeper (the throttle list slid by
        one) with the same ``n_jobs``, or above ``max_recursion_level`` the sequential one."""
        if self._nested is not None:  # asked once per batch: thousands of times per call
            return self._nested
        level = self.level + 1
        nesting = (self.nesting_level or 0) + 1
        limit = self.options.max_recursion_level
        if limit != -1 and level > limit:
            self._nested = SequentialBackend(nesting_level=nesting), self.n_jobs_requested
            return self._nested
        parameters = dict(self._parameters)
        # Nested calls run in jobs, where relative folders mean something else: their logs go beside this one's.
        from b2batch.joblib.parallel_run import log_root

        parameters["settings"] = {**parameters.get("settings", {}), "log_dir": str(log_root(self.options))}
        throttle = parameters.get("throttle")
        if isinstance(throttle, list) and len(throttle) > 1:
            parameters["throttle"] = throttle[1:]
        child = type(self)(nesting_level=nesting, _recursion_level=level, **parameters)
        child.n_jobs_requested = self.n_jobs_requested
        self._nested = child, self.n_jobs_requested
        return self._nested

    # --- where things go ----------------------------------------------------------------------------------

    def shared_data_dir(self) -> Path:
        return self.options.shared_data_folder(self.default_shared_data_dir)

    def new_batch_name(self) -> str:
        return f"b2bj-{uuid.uuid4().hex[:12]}-l{self.level}"

    # --- SIGTERM: the jobs are cancelled, as for an interrupt ----------------------------------------------

    def _catch_sigterm(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
            self._signals[signal.SIGTERM] = signal.SIG_DFL
            signal.signal(signal.SIGTERM, _raise_system_exit)

    def _release_sigterm(self) -> None:
        for signum, handler in self._signals.items():
            if threading.current_thread() is threading.main_thread():
                signal.signal(signum, handler)
        self._signals.clear()


def _raise_system_exit(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def _rebuild(cls: type[B2BatchBackend], parameters: dict[str, Any], nesting_level: int | None,
             n_jobs: int) -> B2BatchBackend:
    backend = cls(nesting_level=nesting_level, **parameters)
    backend.n_jobs_requested = n_jobs
    return backend
