"""The one seam into luigi's worker: in batch mode a task runs as a job instead of a local process.

luigi's public ``build(..., worker_scheduler_factory=...)`` lets us create the worker; the worker's
``_create_task_process`` is private, so it is overridden here and nowhere else, and
``tests/test_luigi_seam.py`` fails loudly if luigi changes what it relies on.
"""

from __future__ import annotations

from typing import Any

import luigi.rpc
import luigi.scheduler
import luigi.worker

from b2batch.systems import process_class, system_name_of


class BatchWorker(luigi.worker.Worker):
    """A luigi worker that sends each task (except those that must run here) to its batch system."""

    def _create_task_process(self, task: Any) -> Any:
        if not _runs_as_job(task):
            return super()._create_task_process(task)
        cls = process_class(system_name_of(task), task)
        return cls(task=task, scheduler=self._scheduler, result_queue=self._task_result_queue,
                   worker_timeout=self._config.timeout)


def _runs_as_job(task: Any) -> bool:
    """Whether the task becomes a job: not for external tasks (nothing to run), wrapper tasks (only
    requirements) and tasks that ask to stay with ``run_local = True``."""
    if getattr(task, "run_local", False):
        return False
    if isinstance(task, luigi.WrapperTask):
        return False
    return getattr(type(task), "run", None) is not None


class BatchWorkerSchedulerFactory:
    """What luigi.build asks for schedulers and workers: luigi's own schedulers, our worker."""

    def create_local_scheduler(self) -> luigi.scheduler.Scheduler:
        return luigi.scheduler.Scheduler(prune_on_get_work=True, record_task_history=False)

    def create_remote_scheduler(self, url: str) -> luigi.rpc.RemoteScheduler:
        return luigi.rpc.RemoteScheduler(url)

    def create_worker(self, scheduler: Any, worker_processes: int, assistant: bool = False) -> BatchWorker:
        return BatchWorker(scheduler=scheduler, worker_processes=worker_processes, assistant=assistant)
