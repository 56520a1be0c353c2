"""``b2luigi.core.executable``: the executable wrapper of a task's job."""

from __future__ import annotations

from typing import Any

__all__ = ["create_executable_wrapper"]


def create_executable_wrapper(task: Any) -> str:
    """Write the task's job files (its spec and executable wrapper, as b2batch would before submitting it)
    and return the wrapper's path. Running the wrapper runs the task, its output in the task's log files."""
    from b2batch.engine import Run
    from b2batch.luigi_frontend.jobs import RunContext, TaskJobs
    from b2batch.runconfig import run_config

    jobs = TaskJobs(Run(config=run_config()), RunContext.of_main())
    job = jobs.make(task)
    jobs.write_files(job)  # renders the wrapper with b2batch.jobscript.wrapper.render_wrapper
    return str(job.files.wrapper)
