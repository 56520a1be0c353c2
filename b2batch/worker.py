"""The one seam into luigi's worker: in batch mode a task runs as a job instead of a local process.

luigi's public ``build(..., worker_scheduler_factory=...)`` lets us create the worker. The worker's
methods overridden here (``_create_task_process``, and for runs of thousands of jobs ``_handle_next_task``,
``_purge_children`` and ``_get_work``) are private, so they are overridden here and nowhere else, and
``tests/test_luigi_seam.py`` fails loudly if luigi changes what they rely on.
"""

from __future__ import annotations

from typing import Any

import luigi.rpc
import luigi.scheduler
import luigi.worker

from b2batch.systems import process_class, system_name_of


class BatchWorker(luigi.worker.Worker):
    """A luigi worker that sends each task (except those that must run here) to its batch system.

    With thousands of jobs running at once, two habits of luigi's worker would cost the steering process
    time and memory that grow with the square of the number of jobs; both are changed here:

    - every result is handled after a pass over all running tasks (``_purge_children``, which asks each
      job ``is_alive()``): here one pass is followed by all the results it produced;
    - every answer of the scheduler, with the list of all running tasks, is kept for the end-of-run
      summary, which only needs the tasks of *other* workers: here only those are kept, each once.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._skip_purge = False
        self._others_running: set[tuple[str, str]] = set()

    def _create_task_process(self, task: Any) -> Any:
        if not runs_as_job(task):
            return super()._create_task_process(task)
        cls = process_class(system_name_of(task), task)
        return cls(task=task, scheduler=self._scheduler, result_queue=self._task_result_queue,
                   worker_timeout=self._config.timeout)

    def _handle_next_task(self) -> None:
        super()._handle_next_task()
        # The results the pass above produced are in the queue: handle them without a pass for each.
        self._skip_purge = True
        try:
            for _ in range(len(self._running_tasks)):
                if self._task_result_queue.empty():
                    break
                super()._handle_next_task()
        finally:
            self._skip_purge = False

    def _purge_children(self) -> None:
        if not self._skip_purge:
            super()._purge_children()

    def _get_work(self) -> Any:
        response = super()._get_work()
        history = self._get_work_response_history
        if history:
            # luigi's execution summary reads the running tasks of answers without work, and of those only
            # the tasks of other workers: keep each of them once, drop the rest.
            entry = history[-1]
            kept = []
            if entry.get("task_id") is None:
                for running in entry.get("running_tasks") or []:
                    key = (running.get("worker"), running.get("task_id"))
                    if key[0] != self._id and key not in self._others_running:
                        self._others_running.add(key)
                        kept.append(running)
            if kept:
                entry["running_tasks"] = kept
            else:
                history.pop()
        return response


def runs_as_job(task: Any) -> bool:
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
