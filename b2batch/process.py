"""``BatchProcess``: what luigi's worker runs instead of its own task process when ``--batch`` is given.

luigi's worker starts a task process, asks it ``is_alive()`` while it runs, reads its result from a queue,
and terminates it when the worker stops. A :class:`BatchProcess` does the same with a job on a batch system:
``start()`` writes the job files and queues the job for submission (:mod:`b2batch.submission`, which calls
:meth:`BatchProcess.start_job` or submits arrays); ``is_alive()`` maps
:meth:`BatchProcess.get_job_status` to luigi's task states and, once the job is over, puts the task's
result on luigi's queue; ``terminate()`` calls :meth:`BatchProcess.kill_job`.
"""

from __future__ import annotations

import abc
import enum
import logging
import time
from typing import Any, ClassVar

import luigi.task
from luigi.scheduler import DONE, FAILED, PENDING

from b2batch import jobfiles
from b2batch.events import RUN
from b2batch.errors import B2BatchError
from b2batch.settings import get_setting
from b2batch.submission import Submitter

logger = logging.getLogger(__name__)

_submitters: dict[type, Submitter] = {}


class JobStatus(enum.Enum):
    """A job's state, as far as b2batch cares."""

    idle = "idle"
    running = "running"
    successful = "successful"
    aborted = "aborted"

    @property
    def final(self) -> bool:
        return self in (JobStatus.successful, JobStatus.aborted)


class BatchProcess(abc.ABC):
    """Runs one task as one job on a batch system, standing in for luigi's ``TaskProcess``.

    Subclasses implement :meth:`start_job`, :meth:`get_job_status` and :meth:`kill_job`; the job's command
    line is :attr:`job_files` ``.wrapper`` (the rendered executable wrapper), whose stdout and stderr go to
    the task's log files and which writes the job's exit code to ``job_files.exit_code``.
    """

    #: Name of the batch system, as used in the ``batch_system`` setting.
    system_name: str = ""
    #: Jobs started by this steering process and not yet over, to kill them when the run is interrupted.
    _alive_jobs: ClassVar[dict[int, BatchProcess]] = {}
    #: Set when the run is interrupted: nothing more is submitted.
    shutting_down: ClassVar[bool] = False

    def __init__(self, task: Any, scheduler: Any, result_queue: Any, worker_timeout: float | None) -> None:
        self.task = task
        self.scheduler = scheduler
        self.result_queue = result_queue
        self.worker_timeout = worker_timeout
        self.timeout_time = None  # luigi's worker reads it; jobs have the batch system's own limits
        self.use_multiprocessing = True  # so luigi calls start(), not run() in-line
        self.exitcode: int | None = None
        self.pid: int | None = None
        self.job_id: str | None = None
        self.job_files = jobfiles.JobFiles.for_task(task)
        self.submitted_at: float | None = None
        self._outputs_deadline: float | None = None
        self.resubmissions = 0
        self._alive = False

    # --- what a batch system implements ---------------------------------------------------------------

    @abc.abstractmethod
    def start_job(self) -> None:
        """Submit :attr:`job_files` ``.wrapper`` as a job and remember its id in :attr:`job_id`."""

    @abc.abstractmethod
    def get_job_status(self) -> JobStatus:
        """The job's current state."""

    @abc.abstractmethod
    def kill_job(self) -> None:
        """Stop the job (a job that already ended is no error)."""

    def failure_reason(self) -> str:
        """Why the scheduler ended the job, if it said (e.g. a hold reason or TIMEOUT); empty if not known."""
        return ""

    def scheduler_side_failure(self) -> str:
        """Why the batch system, not the task, ended the job (node failure, preemption, a lost job ...), or
        empty. Such jobs are submitted again, up to ``max_resubmissions`` times."""
        return ""

    def attach(self, submission: dict[str, Any]) -> bool:
        """Take over the job of an earlier steering process recorded in ``submission`` if the batch system
        still has it queued or running; whether it did."""
        return False

    @classmethod
    def groups_for_submission(cls, jobs: list[BatchProcess]) -> list[list[BatchProcess]]:
        """How waiting jobs go to the batch system: one group per submission (default: one job each)."""
        return [[job] for job in jobs]

    @classmethod
    def submit_group(cls, group: list[BatchProcess]) -> None:
        """Submit a group of :meth:`groups_for_submission`, setting each job's :attr:`job_id`."""
        for job in group:
            job.start_job()

    # --- luigi's side ----------------------------------------------------------------------------------

    @classmethod
    def submitter(cls) -> Submitter:
        if cls not in _submitters:
            _submitters[cls] = Submitter(cls)
        return _submitters[cls]

    def start(self) -> None:
        """Take over a job of an earlier run of this task that still runs, or queue a new one."""
        self._alive = True
        BatchProcess._alive_jobs[id(self)] = self
        RUN.update(self, "waiting")
        previous = self.job_files.read_submission()
        if (previous and previous.get("system") == self.system_name and self.job_files.read_exit_code() is None
                and self.attach(previous)):
            logger.info("Job %s: task %s is still queued or running from an earlier run; following it",
                        self.job_id, self.task)
            self.submitted_at = time.time()
            self.submitter().add_in_flight(self)
            RUN.update(self, "submitted")
            return
        self._queue_submission()

    def _queue_submission(self) -> None:
        try:
            self.job_files.prepare(self.task)
        except B2BatchError as e:
            self.submission_failed(str(e))
            return
        self.job_id = None
        submitter = self.submitter()
        submitter.enqueue(self)
        if not BatchProcess.shutting_down:
            submitter.flush_if_due()

    def submitted(self) -> None:
        """Called by the submitter once the job is with the batch system."""
        self.submitted_at = time.time()
        self.job_files.record_submission(self.system_name, str(self.job_id))
        RUN.update(self, "submitted")
        logger.info("Job %s: submitted task %s to %s", self.job_id, self.task, self.system_name)

    def submission_failed(self, message: str) -> None:
        """Called by the submitter when the batch system did not take the job."""
        self._end(FAILED, f"Task {self.task} could not be submitted to {self.system_name}: {message}")

    def run(self) -> None:
        self.start()

    def is_alive(self) -> bool:
        if not self._alive:
            return False
        if not BatchProcess.shutting_down:
            self.submitter().flush()
        if not self._alive:  # the submission failed
            return False
        if self.job_id is None:
            return True  # waiting for its turn (throttle) or for the batch system to answer again
        if self._outputs_deadline is not None:  # the job succeeded; waiting for its outputs to show
            return not self._check_outputs()
        status = self.get_job_status()
        if not status.final:
            RUN.update(self, "running" if status == JobStatus.running else "queued")
            return True
        result = self.job_files.read_result()
        exit_code = self.job_files.read_exit_code()
        if result is not None and result["status"] == PENDING and result.get("new_deps"):
            logger.info("Job %s: task %s has new dynamic requirements", self.job_id, self.task)
            self._end(PENDING, new_deps=[tuple(d) for d in result["new_deps"]])
            return False
        if result is not None and result["status"] == DONE and exit_code == 0:
            self._outputs_deadline = time.monotonic() + float(get_setting("output_wait_timeout", task=self.task))
            return not self._check_outputs()
        reason = self._resubmission_reason(result)
        if reason and self.resubmissions < int(get_setting("max_resubmissions", task=self.task)):
            self.resubmissions += 1
            logger.warning("Job %s: %s; submitting task %s again (%d of %s)", self.job_id, reason, self.task,
                           self.resubmissions, get_setting("max_resubmissions", task=self.task))
            RUN.update(self, "resubmitted", reason)
            self.submitter().done(self)
            self._queue_submission()
            return self._alive
        self._end(FAILED, self.failure_message(status, result, exit_code))
        return False

    def _resubmission_reason(self, result: dict[str, Any] | None) -> str:
        side = self.scheduler_side_failure()
        if side:
            return side
        if result is not None and get_setting("resubmit_failed_tasks", task=self.task):
            return "the task failed and resubmit_failed_tasks is set"
        return ""

    def terminate(self) -> None:
        """Kill the job; when the run is being interrupted, leave it to :meth:`kill_all`, which kills all
        jobs of a batch system with one command."""
        if not self._alive:
            return
        self._alive = False
        self.submitter().done(self)
        if not BatchProcess.shutting_down:
            BatchProcess._alive_jobs.pop(id(self), None)
            if self.job_id is not None:
                logger.warning("Job %s: killing task %s", self.job_id, self.task)
                self.kill_job()

    @classmethod
    def kill_jobs(cls, jobs: list[BatchProcess]) -> None:
        """Kill several jobs of this batch system (default: one by one)."""
        for job in jobs:
            job.kill_job()

    @classmethod
    def kill_all(cls) -> list[str]:
        """Kill every job of this steering process that is not over, in one go per batch system; their
        descriptions."""
        cls.shutting_down = True
        by_system: dict[type, list[BatchProcess]] = {}
        for job in BatchProcess._alive_jobs.values():
            job.terminate()
            if job.job_id is not None:
                by_system.setdefault(type(job), []).append(job)
        BatchProcess._alive_jobs.clear()
        killed = []
        for system, jobs in by_system.items():
            logger.warning("Killing %d %s job(s)", len(jobs), system.system_name)
            system.kill_jobs(jobs)
            killed += [f"{job.system_name} job {job.job_id} ({job.task.task_id})" for job in jobs]
        return killed

    def join(self, timeout: float | None = None) -> None:
        """Nothing to wait for: the job is not a child process of the steering one."""

    # --- results ---------------------------------------------------------------------------------------

    def _report(self, status: str, explanation: str = "", new_deps: list[Any] | None = None) -> None:
        self.result_queue.put((self.task.task_id, status, explanation, [], new_deps or []))

    def _end(self, status: str, explanation: str = "", new_deps: list[Any] | None = None) -> None:
        """The job is over: tell luigi the task's result (once) and forget the job."""
        self._alive = False
        BatchProcess._alive_jobs.pop(id(self), None)
        self.submitter().done(self)
        self.exitcode = 0  # the result goes through the queue; a non-zero exitcode would report it twice
        if status == FAILED:
            logger.error("%s%s", f"Job {self.job_id}: " if self.job_id else "", explanation)
        RUN.update(self, {DONE: "done", FAILED: "failed"}.get(status, "waiting"), explanation)
        self._report(status, explanation, new_deps)

    def _check_outputs(self) -> bool:
        """Whether the wait for a succeeded job's outputs is over (they appeared, or the time ran out)."""
        assert self._outputs_deadline is not None
        if self.task.complete():
            self._end(DONE)
            return True
        if time.monotonic() < self._outputs_deadline:
            return False
        timeout = get_setting("output_wait_timeout", task=self.task)
        self._end(FAILED, f"Job {self.job_id} of task {self.task} succeeded, but its outputs did not appear "
                  f"within {timeout} s (setting output_wait_timeout): "
                  f"{', '.join(_output_paths(self.task))}. Check that result_dir is on a file system the "
                  f"submit host sees, or that the task writes the outputs it declares.")
        return True

    def failure_message(self, status: JobStatus, result: dict[str, Any] | None, exit_code: int | None) -> str:
        """A message naming the task, its parameters, the exit code, the logs and the end of stderr."""
        params = ", ".join(f"{k}={v}" for k, v in self.task.to_str_params().items()) or "no parameters"
        if exit_code is None:
            what = "ended without an exit code (killed, or lost by the batch system)"
        else:
            what = f"exited with code {exit_code}"
        if exit_code == 127:
            what += (f"; the command was not found on the node: check the setting 'executable' "
                     f"(now {get_setting('executable', task=self.task)!r}) and env_script")
        elif exit_code == 3 and result is None:
            what += "; the job could not set up its environment (env_script or working_dir, see stderr)"
        reason = self.failure_reason()
        lines = [f"Task {self.task.task_family} ({params}) failed: job {self.job_id} on {self.system_name} {what}."]
        if reason:
            lines.append(f"Batch system: {reason}")
        if result is not None and result.get("error"):
            lines.append(f"Error: {result['error']}")
        lines.append(f"stdout: {self.job_files.stdout}")
        lines.append(f"stderr: {self.job_files.stderr}")
        tail = self.job_files.stderr_tail()
        if tail:
            lines.append("Last lines of stderr:\n" + tail)
        return "\n".join(lines)


def _output_paths(task: Any) -> list[str]:
    return [str(getattr(t, "path", t)) for t in luigi.task.flatten(task.output())]
