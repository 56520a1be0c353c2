"""A task's job files outside a run, for code that submits a task itself (b2luigi's ``BatchProcess`` classes
driven by hand, as b2luigi's ``create_executable_wrapper`` lets them): where a ``--batch`` run keeps the task's
job (:func:`task_files`) and the writing of its spec and executable wrapper (:func:`write_task_job_files`).
Public: listed in ``b2batch.PUBLIC_MODULES``."""

from __future__ import annotations

from typing import Any

from b2batch.engine import JobFiles, Run
from b2batch.luigi_frontend.jobs import RunContext, TaskJobs
from b2batch.luigi_frontend.task_outputs import task_files
from b2batch.settings.runconfig import run_config

__all__ = ["task_files", "write_task_job_files"]


def write_task_job_files(task: Any) -> JobFiles:
    """Write ``task``'s job files as a ``--batch`` run with the settings in force now would (its spec,
    ``job.json``, and its executable wrapper), also for a task such a run would put into a pilot or bundle job,
    and return them (``.wrapper`` is the script a batch system runs). Nothing is submitted."""
    run = Run(config=run_config())
    run.needs_job_script = lambda job: True  # type: ignore[method-assign]  # a wrapper of its own, always
    jobs = TaskJobs(run, RunContext.of_main())
    job = jobs.make(task)
    jobs.write_files(job)
    return job.files
