"""``b2luigi.batch.workers``: ``BatchSystems`` (the names the ``batch_system`` setting takes in b2luigi),
``SendJobWorker`` and ``SendJobWorkerSchedulerFactory``.

b2batch does not run tasks through a luigi worker (its graph runner submits jobs; docs/architecture.md), so
``SendJobWorker`` is not one: it keeps b2luigi's API for code that picks a task's batch process itself
(``detect_batch_system(task)``, ``_create_task_process(task)``), with b2luigi's choices and errors.
"""

from __future__ import annotations

import enum
import importlib
import importlib.metadata
import logging
import os
import queue
import types
import uuid
from typing import Any

import luigi.task
import luigi.worker

from b2batch import systems
from b2luigi.batch.processes import BatchProcess
from b2luigi.batch.processes.custom import process_class_of
from b2luigi.core.settings import get_setting

__all__ = ["BatchSystems", "SendJobWorker", "SendJobWorkerSchedulerFactory"]

_PROCESSES = {"lsf": "lsf:LSFProcess", "htcondor": "htcondor:HTCondorProcess", "slurm": "slurm:SlurmProcess",
              "test": "test:TestProcess", "gbasf2": "gbasf2:Gbasf2Process"}
_NAMES = ("auto", "lsf", "htcondor", "slurm", "gbasf2", "local", "test", "custom")
#: b2luigi's plugins: entry points of this group name batch systems (``name = "module:ProcessClass"``).
ENTRY_POINT_GROUP = "b2luigi.batch_systems"


def _plugins() -> dict[str, importlib.metadata.EntryPoint]:
    return {ep.name: ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP) if ep.name not in _NAMES}


def _load_process_class(self: BatchSystems) -> type[BatchProcess] | None:
    """The process class of this batch system (a plugin's is imported now); None for ``auto``, ``local`` and
    ``custom``."""
    reference = _PROCESSES.get(self.value)
    if reference is not None:
        module, _, name = reference.partition(":")
        return getattr(importlib.import_module(f"b2luigi.batch.processes.{module}"), name)
    plugin = _plugins().get(self.value)
    if plugin is None:
        return None
    loaded = plugin.load()
    if not (isinstance(loaded, type) and issubclass(loaded, BatchProcess)):
        raise TypeError(f"Batch system '{self.value}' resolved to {loaded!r}, which is not a BatchProcess subclass.")
    return loaded


#: b2luigi's batch system names, then those of installed plugins (``gbasf2`` is refused by b2batch with an
#: explanation).
BatchSystems = enum.StrEnum("BatchSystems", [(name, name) for name in (*_NAMES, *_plugins())],  # type: ignore[misc]
                            module=__name__)
BatchSystems.load_process_class = _load_process_class  # type: ignore[attr-defined]


def _make_output_folders(task: Any) -> None:
    for target in luigi.task.flatten(task.output()):
        path = getattr(target, "path", None)
        if path and os.path.dirname(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)


class SendJobWorker:
    """b2luigi's worker API: which batch system a task uses and the process that runs it."""

    def __init__(self, scheduler: Any = None, worker_processes: int = 1, assistant: bool = False,
                 **config: Any) -> None:
        self._scheduler = scheduler
        self._worker_processes = worker_processes
        self._assistant = assistant
        self._id = f"SendJobWorker-{uuid.uuid4().hex[:8]}"
        self._task_result_queue: Any = queue.Queue()
        self._config = types.SimpleNamespace(timeout=config.get("timeout", 0))

    def detect_batch_system(self, task: Any) -> BatchSystems:
        """The task's ``batch_system`` (default ``auto``: LSF, HTCondor or Slurm when its submit command is on
        PATH, else local); a name b2luigi does not know is a ``ValueError``."""
        name = get_setting("batch_system", default="auto", task=task)
        if name == "auto":
            name = systems.detect()
            name = name if name in ("lsf", "htcondor", "slurm") else "local"
        return BatchSystems(name)

    def _create_task_process(self, task: Any) -> Any:
        """The process that runs ``task`` on its batch system (for ``local``, luigi's own task process, or the
        apptainer process when ``apptainer_image`` is set). Grouping on a system other than LSF, HTCondor and
        Slurm is a ``RuntimeError``; ``custom`` without ``process_class`` an ``AttributeError``."""
        system = self.detect_batch_system(task)
        grouped = getattr(task, "has_grouped_params", None)
        if grouped is not None and grouped() and task.max_grouping_size > 1:
            if system not in (BatchSystems.htcondor, BatchSystems.slurm, BatchSystems.lsf):
                raise RuntimeError("The grouping of tasks is currently only implemented for HTCondor, Slurm and LSF "
                                   f"processes and not for {system}!")
            logging.warning("Grouping of tasks is currently an experimental feature and should be treated with care!")
        if system == BatchSystems.custom:
            process_class: Any = process_class_of(task)
        elif system == BatchSystems.local:
            if not get_setting("apptainer_image", default="", task=task):
                _make_output_folders(task)
                reporter = luigi.worker.TaskStatusReporter(self._scheduler, task.task_id, self._id, False)
                return luigi.worker.TaskProcess(task, self._id, self._task_result_queue, reporter,
                                                worker_timeout=self._config.timeout)
            from b2luigi.batch.processes.apptainer import ApptainerProcess

            process_class = ApptainerProcess
        else:
            process_class = system.load_process_class()
            if process_class is None:
                raise NotImplementedError(f"Batch system '{system}' has no process class.")
        return process_class(task=task, scheduler=self._scheduler, result_queue=self._task_result_queue,
                             worker_timeout=self._config.timeout)


class SendJobWorkerSchedulerFactory:
    """b2luigi's factory of :class:`SendJobWorker` (and of luigi's local scheduler)."""

    def create_local_scheduler(self) -> Any:
        import luigi.scheduler

        return luigi.scheduler.Scheduler(prune_on_get_work=True, record_task_history=False)

    def create_remote_scheduler(self, url: str) -> Any:
        import luigi.rpc

        return luigi.rpc.RemoteScheduler(url)

    def create_worker(self, scheduler: Any, worker_processes: int, assistant: bool = False) -> SendJobWorker:
        return SendJobWorker(scheduler=scheduler, worker_processes=worker_processes, assistant=assistant)
