"""A task as an engine job where luigi's own worker drives the graph (runs with a central scheduler, ``luigid``):
:class:`JobTaskProcess` stands in for luigi's task process."""

from __future__ import annotations

from typing import Any

from b2batch.luigi_frontend.jobs import TaskJobs, TaskResult


class JobTaskProcess:
    """Stands in for luigi's task process when luigi's own worker drives the graph (runs with ``luigid``):
    the task runs as an engine job of the shared :class:`TaskJobs`, its result goes to luigi's queue."""

    use_multiprocessing = True  # so that luigi's worker calls start()
    timeout_time = None  # jobs have the batch system's own limits
    exitcode = 0  # results go through the queue; a non-zero exit code would report them twice

    def __init__(self, jobs: TaskJobs, task: Any, result_queue: Any, results: dict[str, TaskResult]) -> None:
        self.jobs = jobs
        self.task = task
        self.result_queue = result_queue
        self.results = results  # shared by the run's processes: results polled for another task wait there
        self._alive = False

    def start(self) -> None:
        self._alive = True
        self.jobs.start(self.task)

    def run(self) -> None:
        self.start()

    def is_alive(self) -> bool:
        if not self._alive:
            return False
        for result in self.jobs.poll():
            self.results[result.task.task_id] = result
        result = self.results.pop(self.task.task_id, None)
        if result is None:
            return True
        self._alive = False
        self.result_queue.put((self.task.task_id, result.status, result.explanation, [], result.new_deps))
        return False

    def terminate(self) -> None:
        if self._alive:
            self._alive = False
            if not self.jobs.run.interrupted:
                self.jobs.cancel(self.task)

    def join(self, timeout: float | None = None) -> None:
        """Nothing to wait for: the job is no child process of this one."""
