"""pypoolparty's pools on b2batch's engine: the same class paths, constructor arguments and behaviour.

``b2batch.pool.slurm.array.Pool``, ``b2batch.pool.slurm.Pool`` and ``b2batch.pool.sun_grid_engine.Pool``
take pypoolparty 0.3's arguments under the same names and keep its documented behaviour, so that its users'
code runs unchanged:

- ``map(func, tasks)`` returns a list with one value per task; a task that raised gives ``None`` (its
  traceback goes to the job's stderr) and ``map`` does not raise;
- the work dir (per ``map``: ``work_dir/<UTC time>``, or ``./.pypoolparty_<UTC time>`` without ``work_dir``)
  is removed when all went well and kept when ``keep_work_dir`` is set, a task raised, or a job wrote to stderr;
- a job that is killed, lost or ends in an error state is submitted again up to ``max_num_resubmissions``
  times; after that its tasks give None (a warning says why) and the work dir is kept.

Where b2batch does more: the function is cloudpickled (``__main__`` functions, lambdas and closures
work), ``python_path`` defaults to this interpreter rather than ``which("python")``, a job that vanished from
the queue is resubmitted or reported instead of waited for, and arrays are cut at ``max_array_size``.
The paths of the scheduler's commands (``sbatch_path`` ...) are accepted; b2batch runs those on PATH and
warns when another is named. ``settings`` passes b2batch settings (e.g. ``slurm_settings``).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable
from typing import Any

from b2batch.pool import chunk_on_node
from b2batch.pool.pool import Pool

logger = logging.getLogger(__name__)

#: pypoolparty's resubmission limit where it has one (its array pool's default, None, means no limit).
DEFAULT_RESUBMISSIONS = 10


class OptionError(ValueError, AssertionError):
    """A constructor argument that cannot work. pypoolparty checks its arguments with ``assert``: this is an
    AssertionError too, so that code that catches pypoolparty's error catches this one."""


class PypoolpartyPool:
    """What the three pools share: ``map`` and ``starmap`` with pypoolparty's semantics."""

    batch_system = ""
    #: The prefix of the work dir made in ``work_dir`` for each map.
    session_name = "pypoolparty"

    def __init__(self, *, python_path: str | None = None, polling_interval: float = 5.0,
                 work_dir: str | None = None, keep_work_dir: bool = False, verbose: bool = False,
                 max_num_resubmissions: int | None = DEFAULT_RESUBMISSIONS,
                 num_simultaneously_running_tasks: int | None = None, num_chunks: int | None = None,
                 commands: dict[str, tuple[str, str]] | None = None, settings: dict[str, Any] | None = None) -> None:
        if float(polling_interval) < 0:
            raise OptionError(f"pypoolparty pool: polling_interval must be 0 or more seconds, not "
                              f"{polling_interval!r}")
        if num_chunks is not None and num_chunks < 1:
            raise OptionError(f"pypoolparty pool: num_chunks must be at least 1 (or None: one chunk per task), not "
                              f"{num_chunks!r}")
        self.python_path = python_path
        self.polling_interval = max(float(polling_interval), 0.05)  # 0: as often as b2batch's steering allows
        self.work_dir = work_dir
        self.keep_work_dir = bool(keep_work_dir)
        self.verbose = bool(verbose)
        self.max_num_resubmissions = DEFAULT_RESUBMISSIONS if max_num_resubmissions is None else max_num_resubmissions
        self.num_simultaneously_running_tasks = num_simultaneously_running_tasks
        self.num_chunks = num_chunks
        self.slurm_call_timeout: float | None = None  # the array pool's argument; its scheduler commands' limit
        # pypoolparty runs every item (chunk) in a job of its own: its profile keeps that shape (b2batch.Pool
        # takes the run's job_shape, auto by default).
        self.settings = {"job_shape": "job_per_task", **dict(settings or {})}
        for argument, (given, default) in (commands or {}).items():
            if given != default:
                logger.warning("%s=%r is ignored: b2batch runs %r from PATH", argument, given, default)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def _chunksize(self, count: int, chunksize: int | None) -> int:
        if chunksize is not None:
            return max(1, int(chunksize))
        return math.ceil(count / self.num_chunks) if self.num_chunks else 1

    def _run(self, how: str, func: Callable[..., Any], tasks: list[Any], chunksize: int | None) -> list[Any]:
        if not tasks:
            return []
        # pypoolparty's work dir: work_dir/<UTC time>, or ./<prefix><UTC time> without work_dir.
        session = time.strftime("%Y-%m-%dT%H-%M-%S", time.gmtime())
        pool = Pool(batch_system=self.batch_system,
                    num_simultaneously_running_tasks=self.num_simultaneously_running_tasks,
                    python_path=self.python_path, polling_interval=self.polling_interval,
                    work_dir=self.work_dir or ".", keep_work_dir=self.keep_work_dir, verbose=self.verbose,
                    max_num_resubmissions=self.max_num_resubmissions, settings=self.settings,
                    slurm_call_timeout=self.slurm_call_timeout, task_errors=chunk_on_node.NONE, name=self.session_name,
                    folder=session if self.work_dir else f"{self.session_name}_{session}")
        with pool:
            size = self._chunksize(len(tasks), chunksize)
            if how == "star":
                return pool.starmap(func, tasks, chunksize=size)
            return pool.map(func, tasks, chunksize=size)

    def map(self, func: Callable[..., Any], iterable: Iterable[Any], chunksize: int | None = None) -> list[Any]:
        """``[func(task) for task in iterable]`` in jobs; a task that raised gives None."""
        return self._run("one", func, list(iterable), chunksize)

    def starmap(self, func: Callable[..., Any], iterable: Iterable[Iterable[Any]],
                chunksize: int | None = None) -> list[Any]:
        """``[func(*task) for task in iterable]`` in jobs; a task that raised gives None."""
        return self._run("star", func, list(iterable), chunksize)


class SlurmArrayPool(PypoolpartyPool):
    """``pypoolparty.slurm.array.Pool``: each task one element of a Slurm job array."""

    batch_system = "slurm"
    session_name = ".pypoolparty_slurm_array"

    def __init__(self, num_simultaneously_running_tasks: int | None = None, python_path: str | None = None,
                 polling_interval: float = 5.0, work_dir: str | None = None, keep_work_dir: bool = False,
                 verbose: bool = False, slurm_call_timeout: float = 60.0, max_num_resubmissions: int | None = None,
                 sbatch_path: str = "sbatch", squeue_path: str = "squeue", scancel_path: str = "scancel",
                 settings: dict[str, Any] | None = None) -> None:
        super().__init__(python_path=python_path, polling_interval=polling_interval, work_dir=work_dir,
                         keep_work_dir=keep_work_dir, verbose=verbose, max_num_resubmissions=max_num_resubmissions,
                         num_simultaneously_running_tasks=num_simultaneously_running_tasks, settings=settings,
                         commands={"sbatch_path": (sbatch_path, "sbatch"), "squeue_path": (squeue_path, "squeue"),
                                   "scancel_path": (scancel_path, "scancel")})
        if float(polling_interval) <= 0:  # the array pool's own check
            raise OptionError(f"pypoolparty slurm.array.Pool: polling_interval must be above 0 seconds, not "
                              f"{polling_interval!r}")
        if float(slurm_call_timeout) < 0:
            raise OptionError(f"pypoolparty slurm.array.Pool: slurm_call_timeout must be 0 or more seconds, not "
                              f"{slurm_call_timeout!r}")
        self.slurm_call_timeout = float(slurm_call_timeout)

    def _chunksize(self, count: int, chunksize: int | None) -> int:
        return 1  # pypoolparty's array pool ignores chunksize: one task per array element


class SlurmPool(PypoolpartyPool):
    """``pypoolparty.slurm.Pool``: the tasks in ``num_chunks`` chunks (default: one per task), a job each."""

    batch_system = "slurm"
    session_name = ".pypoolparty"

    def __init__(self, num_chunks: int | None = None, python_path: str | None = None, polling_interval: float = 5.0,
                 work_dir: str | None = None, keep_work_dir: bool = False, max_num_resubmissions: int = 10,
                 verbose: bool = False, sbatch_path: str = "sbatch", clusters: list[str] | None = None,
                 squeue_path: str = "squeue", scancel_path: str = "scancel",
                 settings: dict[str, Any] | None = None) -> None:
        values = dict(settings or {})
        if clusters:
            values["slurm_settings"] = {**values.get("slurm_settings", {}), "clusters": ",".join(clusters)}
        super().__init__(python_path=python_path, polling_interval=polling_interval, work_dir=work_dir,
                         keep_work_dir=keep_work_dir, verbose=verbose, max_num_resubmissions=max_num_resubmissions,
                         num_chunks=num_chunks, settings=values,
                         commands={"sbatch_path": (sbatch_path, "sbatch"), "squeue_path": (squeue_path, "squeue"),
                                   "scancel_path": (scancel_path, "scancel")})


class SunGridEnginePool(PypoolpartyPool):
    """``pypoolparty.sun_grid_engine.Pool``: the tasks in ``num_chunks`` chunks (default: one per task)."""

    batch_system = "sge"
    session_name = ".pypoolparty"

    def __init__(self, num_chunks: int | None = None, python_path: str | None = None, polling_interval: float = 5.0,
                 work_dir: str | None = None, keep_work_dir: bool = False, max_num_resubmissions: int = 10,
                 verbose: bool = False, qsub_path: str = "qsub", queue_name: str | None = None,
                 qstat_path: str = "qstat", error_state_indicator: str = "E", qdel_path: str = "qdel",
                 settings: dict[str, Any] | None = None) -> None:
        values = dict(settings or {})
        if queue_name:
            values["sge_settings"] = {**values.get("sge_settings", {}), "queue": queue_name}
        super().__init__(python_path=python_path, polling_interval=polling_interval, work_dir=work_dir,
                         keep_work_dir=keep_work_dir, verbose=verbose, max_num_resubmissions=max_num_resubmissions,
                         num_chunks=num_chunks, settings=values,
                         commands={"qsub_path": (qsub_path, "qsub"), "qstat_path": (qstat_path, "qstat"),
                                   "qdel_path": (qdel_path, "qdel"),
                                   "error_state_indicator": (error_state_indicator, "E")})
