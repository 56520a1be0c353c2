"""``BatchProcess``: the way b2luigi documents adding a batch system, kept as b2batch's plugin interface.

A plugin subclasses :class:`BatchProcess` and implements :meth:`~BatchProcess.start_job`,
:meth:`~BatchProcess.get_job_status` and :meth:`~BatchProcess.kill_job` for one task's job, as in b2luigi::

    class MyProcess(b2batch.BatchProcess):
        def start_job(self):
            self.my_id = submit(self.job_files.wrapper)          # the rendered executable wrapper
        def get_job_status(self):
            return b2batch.JobStatus.running                     # idle, running, successful or aborted
        def kill_job(self):
            cancel(self.my_id)

and is named by the ``batch_system`` setting (the class itself) or an entry point of the group
``b2batch.batch_systems`` (or b2luigi's ``b2luigi.batch_systems``). :class:`ProcessSystem` adapts such a
class to the engine: one ``BatchProcess`` per job, asked about its job at most once per ``poll_interval``.

A subclass that names one of b2batch's own batch systems in :attr:`BatchProcess.engine_system` (b2luigi's
``SlurmProcess`` and friends, in the compat layer) is that system on the engine: named as ``batch_system``,
its tasks are submitted by b2batch's system, not through the class's own ``start_job``.

b2luigi's base class also answers luigi's process protocol (``run``, ``is_alive``, ``terminate``, ``exitcode``)
with the task's result put on ``result_queue``, for code that drives a process as b2luigi's worker does.
"""

from __future__ import annotations

import abc
import logging
import time
from collections.abc import Iterable
from typing import Any

from luigi.scheduler import DONE, FAILED

from b2batch.engine import BatchSystem, Job, JobFiles, JobState, JobStatus

logger = logging.getLogger(__name__)


class BatchProcess(abc.ABC):
    """One task's job on a batch system, as b2luigi's plugins implement it.

    :attr:`task` is the luigi task; :attr:`job_files` ``.wrapper`` is the job's command (the rendered
    executable wrapper, whose stdout and stderr go to the task's log files and which writes the job's exit
    code to ``job_files.exit_code``).
    """

    #: Name of the batch system, as used in the ``batch_system`` setting.
    system_name: str = ""
    #: The name of one of b2batch's own batch systems this class stands for on the engine ("" for a plugin).
    engine_system: str = ""

    def __init__(self, task: Any, scheduler: Any = None, result_queue: Any = None,
                 worker_timeout: float | None = None) -> None:
        self.task = task
        self.scheduler = self._scheduler = scheduler
        self.result_queue = self._result_queue = result_queue
        self.worker_timeout = worker_timeout
        self.timeout_time = time.time() + worker_timeout if worker_timeout else None
        self.use_multiprocessing = False
        self._terminated = False
        self.job_id: str | None = None
        self.job_files: JobFiles | None = None  # set before start_job

    @classmethod
    def for_task(cls, task: Any) -> BatchProcess:
        """The process that runs ``task``'s job (b2luigi's ``custom`` system picks the task's ``process_class``)."""
        return cls(task=task)

    @abc.abstractmethod
    def start_job(self) -> None:
        """Submit :attr:`job_files` ``.wrapper`` as a job; remember what identifies it (e.g. in :attr:`job_id`)."""

    @abc.abstractmethod
    def get_job_status(self) -> JobStatus:
        """The job's current state: idle, running, successful or aborted."""

    def kill_job(self) -> None:
        """Stop the job (a job that already ended is no error). Plugins written for older b2luigi versions
        implement ``terminate_job`` instead."""
        if type(self).terminate_job is not BatchProcess.terminate_job:
            self.terminate_job()
            return
        raise NotImplementedError(f"{type(self).__name__} implements neither kill_job nor terminate_job")

    def terminate_job(self) -> None:
        """b2luigi's older name of :meth:`kill_job`."""
        self.kill_job()

    def failure_reason(self) -> str:
        """Why the batch system ended the job, if it said (e.g. a hold reason); empty if not known."""
        return ""

    def scheduler_side_failure(self) -> str:
        """Why the batch system, not the task, ended the job (node failure, preemption ...), or empty: such
        jobs are submitted again, up to ``max_resubmissions`` times."""
        return ""

    # --- luigi's process protocol, as b2luigi's worker drives a batch process ----------------------------------

    @property
    def exitcode(self) -> int:
        """Always 0: the task's result travels through ``result_queue``, not through an exit code."""
        return 0

    def run(self) -> None:
        """Log and start the job (b2luigi's worker calls this once)."""
        logger.info("Batch process %s running  %s", type(self).__name__, self.task)
        self.start_job()

    def terminate(self) -> None:
        """Stop the job (:meth:`terminate_job`)."""
        self.terminate_job()

    def is_alive(self) -> bool:
        """Whether the job still runs; once it ended, its result (DONE or FAILED) is put on ``result_queue``
        once and the process counts as ended. Another answer of :meth:`get_job_status` is a ValueError."""
        if self._terminated:
            return False
        status = getattr(self.get_job_status(), "value", None)
        if status in (JobStatus.running.value, JobStatus.idle.value):
            return True
        if status == JobStatus.successful.value:
            self._put_to_result_queue(status=DONE, explanation="")
        elif status == JobStatus.aborted.value:
            self._put_to_result_queue(status=FAILED, explanation=self._failure_explanation())
        else:
            raise ValueError("get_job_status() returned an unknown job state!")
        self._terminated = True
        return False

    def _failure_explanation(self) -> str:
        return f"The batch job of {self.task} failed. {self.failure_reason()}".strip()

    def _put_to_result_queue(self, status: str, explanation: str) -> None:
        self._result_queue.put((self.task.task_id, status, explanation, [], []))


class ProcessSystem(BatchSystem):
    """A :class:`BatchProcess` subclass as an engine batch system: one process object per job. A class whose
    :attr:`~BatchProcess.engine_system` names one of b2batch's systems gives that system instead."""

    def __new__(cls, run: Any, process_class: type[BatchProcess]) -> Any:
        if process_class.engine_system:
            from b2batch.engine.pilots.shaping_system import ShapingSystem
            from b2batch.systems import system_class

            return ShapingSystem(run, system_class(process_class.engine_system)(run))
        return super().__new__(cls)

    def __init__(self, run: Any, process_class: type[BatchProcess]) -> None:
        super().__init__(run)
        self.process_class = process_class
        self.name = process_class.system_name or process_class.__name__  # type: ignore[misc]
        self.processes: dict[int, BatchProcess] = {}
        self._asked_at = float("-inf")

    def submit(self, group: list[Job]) -> None:
        for job in group:
            process = self.process_class.for_task(job.payload)
            process.job_files = job.files
            process.start_job()
            job.job_id = str(process.job_id) if process.job_id is not None else f"{self.name}-{id(process):x}"
            self.processes[id(job)] = process

    def states(self, jobs: Iterable[Job]) -> dict[Job, JobState]:
        if time.monotonic() - self._asked_at < self.run.config.poll_interval:
            return {}
        self._asked_at = time.monotonic()
        found = {}
        for job in jobs:
            process = self.processes.get(id(job))
            if process is None:
                continue
            status = process.get_job_status()
            if not isinstance(status, JobStatus):
                status = JobStatus(getattr(status, "value", status))  # b2luigi's own JobStatus enum
            found[job] = JobState(status, process.failure_reason(), process.scheduler_side_failure())
            if status.final:
                _word_for_wrapper(job.files, status, found[job].reason)
        return found

    def cancel(self, jobs: list[Job]) -> None:
        for job in jobs:
            process = self.processes.get(id(job))
            if process is not None:
                try:
                    process.kill_job()
                except Exception as e:  # a plugin's error must not stop the others' cancellation
                    logger.warning("Job %s: %s could not cancel it: %s", job.job_id, self.name, e)

    def forget(self, job: Job) -> None:
        self.processes.pop(id(job), None)


def _word_for_wrapper(files: JobFiles, status: JobStatus, reason: str) -> None:
    """A plugin's job that ran a command of its own rather than b2batch's wrapper (b2luigi's
    ``create_executable_wrapper``, whose ``--batch-runner`` runs the task) wrote no exit code nor result: the
    plugin's word stands for them, as it does in b2luigi (successful: exit code 0, and the task's outputs decide;
    aborted: exit code 1)."""
    done = status == JobStatus.successful
    files.stand_in_for_wrapper(done, {"status": DONE if done else FAILED, "error": "" if done else reason})
