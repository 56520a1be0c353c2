"""On the node: the JobConfig a task's job was made with, for b2batch's own code that runs there.

The steering process resolves a job's settings once, into its :class:`~b2batch.engine.jobconfig.JobConfig`
(:meth:`TaskJobs.config_of <b2batch.luigi_frontend.jobs.TaskJobs.config_of>`), writes the job script from it and
puts it into the job's spec (``spec["config"]``, :meth:`JobConfig.as_dict`). On the node,
:func:`~b2batch.luigi_frontend.task_on_node.run_task` hands it to the task it rebuilt (:func:`attach`), and
b2batch's code that works for the job there reads the job's values from it, not from the settings files, which
may have been edited since the job was made: the environment a dispatched ``run()`` gets (``env_script``,
``env``), the folder of temporary files (``scratch_dir``) and the job's folder, where the checkpoint is kept.

The task's own code sees the settings as before: ``get_setting`` in its ``run()`` reads the steering process's
settings snapshot (``spec["settings"]``: its ``set_setting`` values and the run's flags, and the settings files
it used, read again on the node). See docs/architecture.md, "Settings on the node".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from b2batch.engine.jobconfig import JobConfig

#: The task's attribute that holds its :class:`NodeJob` in its job (no setting's name: the resolver ignores it).
ATTRIBUTE = "_b2batch_node_job"


@dataclass(frozen=True)
class NodeJob:
    """The job a task runs in: its JobConfig as the steering process resolved it, and its job folder."""

    config: JobConfig
    folder: Path


def attach(task: Any, spec: dict[str, Any]) -> None:
    """Give ``task`` (rebuilt from ``spec`` in its job) the job's JobConfig and folder. A spec without a config
    (written by an older b2batch) attaches nothing: the task's settings are then read when needed, as before."""
    values = spec.get("config")
    if values is not None:
        setattr(task, ATTRIBUTE, NodeJob(JobConfig(values), Path(spec["result_file"]).parent))


def node_job(task: Any) -> NodeJob | None:
    """The job ``task`` runs in on this node; None in the steering process, and for every other task (a
    requirement whose outputs it reads)."""
    return getattr(task, "__dict__", {}).get(ATTRIBUTE)
