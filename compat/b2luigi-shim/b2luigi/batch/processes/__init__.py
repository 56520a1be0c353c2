"""``b2luigi.batch.processes``: ``BatchProcess`` and ``JobStatus`` (b2batch's), and b2luigi's grouping helpers.

``BatchProcess`` is the base class a b2luigi user subclasses for a batch system of their own (``start_job``,
``get_job_status``, ``terminate_job``); b2batch drives such a class as a batch system (one object per task's job,
:class:`b2batch.luigi_frontend.batch_process.ProcessSystem`) when a task names it: ``batch_system = "custom"``
with ``process_class = MyProcess``, an entry point of ``b2luigi.batch_systems``, or the class as ``batch_system``.

:func:`expand_grouped_task`, :func:`aggregate_job_status` and :func:`write_failed_jobs_log` are b2luigi's helpers
for a process that submits one job per member of a parameter-grouped task (luigi's batching gives such a task
a tuple for each grouped parameter).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from b2batch import JobStatus
from b2batch import BatchProcess

__all__ = ["BatchProcess", "JobStatus", "MemberJobsProcess", "aggregate_job_status", "expand_grouped_task", "status_of",
           "write_failed_jobs_log"]


def expand_grouped_task(task: Any) -> list[Any]:
    """The scalar tasks a grouped ``task`` stands for that are not complete yet, one per value of its grouped
    parameters; ``[task]`` when it has no grouped parameter or their values are no tuple (not batched)."""
    names = list(task.grouped_param_names()) if hasattr(task, "grouped_param_names") else []
    if not names or not isinstance(task.param_kwargs[names[0]], tuple):
        return [task]
    members = (task.clone(None, **{name: task.param_kwargs[name][index] for name in names})
               for index in range(len(task.param_kwargs[names[0]])))
    return [member for member in members if not member.complete()]


def aggregate_job_status(statuses: Iterable[JobStatus]) -> JobStatus:
    """One status for the jobs of one task: running while one runs, else aborted if one failed (or there is
    none), else successful."""
    found = list(statuses)
    if not found:
        return JobStatus.aborted
    for status in (JobStatus.running, JobStatus.aborted):
        if status in found:
            return status
    return JobStatus.successful


def write_failed_jobs_log(task: Any, failed_jobs: Mapping[Any, str]) -> str:
    """Write ``failed_jobs.log`` (a line ``<job id>: <log folder>`` per failed job) into the task's log folder;
    its path."""
    from b2luigi.core.utils import get_log_file_dir

    folder = get_log_file_dir(task)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "failed_jobs.log")
    with open(path, "w") as log:
        log.writelines(f"{job_id}: {job_log}\n" for job_id, job_log in failed_jobs.items())
    return path


def status_of(state: Any, successful: Iterable[Any], running: Iterable[Any], aborted: Iterable[Any],
              system: str) -> JobStatus:
    """The JobStatus of a scheduler's job state, by the states that mean each; ValueError for another state."""
    for states, status in ((successful, JobStatus.successful), (running, JobStatus.running),
                           (aborted, JobStatus.aborted)):
        if state in states:
            return status
    raise ValueError(f"Unknown {system} Job status: {state}")


class MemberJobsProcess(BatchProcess):
    """A b2luigi process that submits one job per member of its task (Slurm's, LSF's): their status together,
    with a ``failed_jobs.log`` naming the failed ones and their log folders."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._batch_job_ids: list[Any] = []
        self._job_log_dirs: dict[Any, str] = {}

    @staticmethod
    def _get_job_status_for_id(job_id: Any) -> JobStatus:
        raise NotImplementedError

    def get_job_status(self) -> JobStatus:
        """The status of all the task's jobs together; a ``failed_jobs.log`` names the failed ones."""
        statuses = {job_id: self._get_job_status_for_id(job_id) for job_id in self._batch_job_ids}
        status = aggregate_job_status(statuses.values())
        if status == JobStatus.aborted:
            write_failed_jobs_log(self.task, {job_id: self._job_log_dirs.get(job_id, "")
                                              for job_id, one in statuses.items() if one == JobStatus.aborted})
        return status
