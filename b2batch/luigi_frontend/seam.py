"""Every private name of luigi that b2batch uses, and nothing else. ``tests/package/test_luigi_seam.py`` is the
tripwire: it fails loudly when luigi changes one of these.

- The execution summary: luigi makes it from a worker's private history (``_add_task_history``,
  ``_get_work_response_history``, ``_scheduled_tasks``, ``_id``) with ``execution_summary._summary_dict``.
  b2batch's graph runner keeps the same history in a :class:`SummaryView` so that luigi's own summary text,
  status codes and :class:`luigi.execution_summary.LuigiRunResult` come out unchanged.
- The luigid path: a :class:`LuigidWorker` overrides the private ``Worker._create_task_process`` so that a task
  becomes an engine job while luigi's worker and the central scheduler drive the graph.
- The job side: luigi's ``TaskProcess`` runs one task in this process and reports ``(task_id, status,
  explanation, missing, new_deps)`` through a queue.
- Parameter type warnings: luigi's ``Parameter`` and ``TimeDeltaParameter`` warn of a value of another type in
  the private ``_warn_on_wrong_param_type`` only when ``self.__class__`` is exactly their class; b2batch's
  classes of the same name warn where luigi's would (:func:`warn_as_luigi_class`).
"""

from __future__ import annotations

import getpass
import os
import queue
import random
from collections.abc import Callable
from typing import Any

import luigi.execution_summary
import luigi.parameter
import luigi.rpc
import luigi.scheduler
import luigi.worker

from b2batch.engine.processes import host_name

#: The private attributes of luigi's Worker that its execution summary reads.
SUMMARY_ATTRIBUTES = ("_add_task_history", "_get_work_response_history", "_scheduled_tasks", "_id")


class SummaryView:
    """What luigi's execution summary reads of a worker, kept by b2batch's graph runner."""

    def __init__(self, workers: int = 1) -> None:
        # luigi's worker id, as its log lines show it ("[pid 12] Worker Worker(salt=..., ...) running   Task()")
        self._id = (f"Worker(salt={random.randrange(10 ** 9)}, workers={workers}, host={host_name()}, "
                    f"username={getpass.getuser()}, pid={os.getpid()})")
        self._add_task_history: list[tuple[Any, str, bool]] = []
        self._get_work_response_history: list[dict[str, Any]] = []
        self._scheduled_tasks: dict[str, Any] = {}

    def add(self, task: Any, status: str, runnable: bool) -> None:
        """What luigi's worker records when it tells its scheduler of a task's status."""
        self._scheduled_tasks[task.task_id] = task
        self._add_task_history.append((task, status, runnable))


def summary_sets(worker: Any) -> dict[str, set[Any]]:
    """luigi's sets of tasks by outcome (``completed``, ``already_done``, ``failed``, ``still_pending_ext``,
    ``upstream_failure`` ...) for a worker or a :class:`SummaryView`."""
    return luigi.execution_summary._summary_dict(worker)


def run_result(worker: Any, scheduling_succeeded: bool) -> luigi.execution_summary.LuigiRunResult:
    """luigi's result of a run (summary text, status code), as ``luigi.build(detailed_summary=True)`` gives."""
    return luigi.execution_summary.LuigiRunResult(worker, scheduling_succeeded)


def run_in_process(task: Any, worker_id: str, reporter: Any,
                   check_requirements: bool = True) -> tuple[str, str, list[str], list[Any]]:
    """Run ``task`` here as luigi's worker would in a task process (events, dynamic requirements, the
    check of its requirements unless ``check_requirements`` is false: a task with a failure budget runs
    without some); its status, explanation, missing requirements and new requirements."""
    results: queue.Queue[Any] = queue.Queue()
    luigi.worker.TaskProcess(task, worker_id, results, reporter, use_multiprocessing=False,
                             check_unfulfilled_deps=check_requirements).run()
    _task_id, status, explanation, missing, new_deps = results.get_nowait()
    return status, explanation or "", list(missing or []), list(new_deps or [])


class LuigidWorker(luigi.worker.Worker):
    """luigi's worker, for runs with a central scheduler (``--scheduler-host``): tasks that run as jobs get
    an engine-driven stand-in of luigi's task process, made by ``make_process(task, result_queue)``."""

    def __init__(self, make_process: Callable[[Any, Any], Any] | None, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._make_process = make_process

    def _create_task_process(self, task: Any) -> Any:
        process = self._make_process(task, self._task_result_queue) if self._make_process else None
        return process if process is not None else super()._create_task_process(task)


class LuigidFactory:
    """What ``luigi.build(worker_scheduler_factory=...)`` asks for: luigi's schedulers, our worker."""

    def __init__(self, make_process: Callable[[Any, Any], Any] | None) -> None:
        self.make_process = make_process

    def create_local_scheduler(self) -> luigi.scheduler.Scheduler:
        return luigi.scheduler.Scheduler(prune_on_get_work=True, record_task_history=False)

    def create_remote_scheduler(self, url: str) -> luigi.rpc.RemoteScheduler:
        return luigi.rpc.RemoteScheduler(url)

    def create_worker(self, scheduler: Any, worker_processes: int, assistant: bool = False) -> LuigidWorker:
        return LuigidWorker(self.make_process, scheduler=scheduler, worker_processes=worker_processes,
                            assistant=assistant)


def setup_logging(build_params: dict[str, Any]) -> None:
    """Configure logging as ``luigi.build`` does with the same parameters (``log_level``,
    ``logging_conf_file``, ``no_configure_logging`` ...)."""
    import luigi.interface
    import luigi.setup_logging

    params = {k: v for k, v in build_params.items() if k != "detailed_summary"}
    luigi.setup_logging.InterfaceLogging.setup(luigi.interface.core(**params))


#: luigi's check of a value's type, for the classes whose check looks at ``self.__class__`` itself.
_TYPE_CHECKS = {luigi.parameter.Parameter: luigi.parameter.Parameter._warn_on_wrong_param_type,
                luigi.parameter.TimeDeltaParameter: luigi.parameter.TimeDeltaParameter._warn_on_wrong_param_type}


def warn_as_luigi_class(cls: type, luigi_class: type) -> type:
    """``cls`` (b2batch's subclass of ``luigi_class``, same name), made to warn of a parameter value of another
    type where ``luigi_class`` itself would: luigi's own check runs on a bare ``luigi_class`` object with the
    parameter's attributes, so the warning is luigi's (text, place). Subclasses of ``cls`` do not warn, as in luigi."""
    check = _TYPE_CHECKS.get(luigi_class)
    if check is None:
        return cls

    def _warn_on_wrong_param_type(self: Any, param_name: str, param_value: Any) -> None:
        if type(self) is cls:
            as_luigi = object.__new__(luigi_class)
            as_luigi.__dict__.update(vars(self))
            check(as_luigi, param_name, param_value)

    cls._warn_on_wrong_param_type = _warn_on_wrong_param_type
    return cls
