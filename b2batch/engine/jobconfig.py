""":class:`JobConfig`: the settings of one job, resolved once by its front-end when the job is made, then fixed.

The engine, the batch systems and the job script read a job's settings only from ``job.config`` (``job.config
["slurm_settings"]`` or ``job.config.slurm_settings``), never from the settings store: nothing below the
front-ends looks a setting up. A front-end's resolver (the luigi front-end's ``TaskJobs.config_of``, the calls
executor's, the farm's) fills in every name of :data:`JOB_SETTINGS` with one written precedence per profile
(b2batch's: the task's attribute or method, then the run's flags, then ``set_setting``, then the settings
files, then the defaults); units with the same settings share one JobConfig, so a run of 10,000 tasks of one
class resolves them once. The node side gets it serialised (:meth:`JobConfig.as_dict`) where it needs it: the luigi
front-end puts it into each task's job spec (``spec["config"]``), read on the node by
``b2batch.luigi_frontend.job_on_node``; pilot and bundle workers get their values in ``spec["worker"]``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any

#: What a job's wrapper is made of (the job script: :mod:`b2batch.jobscript.wrapper` and ``containers``);
#: ``settings_files`` is no setting: the settings files the job reads (a container mounts them).
WRAPPER_NAMES = ("executable", "env_script", "env", "working_dir", "shell", "job_name", "container",
                 "apptainer_image", "apptainer_mounts", "apptainer_mount_defaults", "apptainer_additional_params",
                 "apptainer_cmd", "result_dir", "log_dir", "task_file_dir", "scratch_dir", "batch_system",
                 "settings_files")
#: How the engine shapes, follows and heals the job (pilots, bundles, resubmissions, timeouts).
ENGINE_NAMES = ("job_shape", "pilot_jobs", "tasks_per_job", "max_array_size", "pilot_idle_timeout",
                "pilot_walltime", "pilot_task_seconds", "heartbeat_timeout", "scheduler_unreachable_timeout",
                "max_checkpoint_requeues", "resubmit_failed_tasks", "max_resubmissions")
#: What the batch systems put into their submit commands and how they follow the job.
SYSTEM_NAMES = ("slurm_settings", "sge_settings", "lsf_settings", "htcondor_settings", "htcondor_pool",
                "htcondor_schedd", "transfer_files", "queue", "job_slots", "max_jobs_in_flight",
                "scheduler_call_timeout", "poll_interval", "max_poll_interval", "output_wait_timeout")
#: Every setting a JobConfig holds: what engine/, systems/ and jobscript/ read of a job.
JOB_SETTINGS = (*WRAPPER_NAMES, *ENGINE_NAMES, *SYSTEM_NAMES)


class JobConfig(Mapping[str, Any]):
    """The resolved settings of one job (or of every job with the same settings): a read-only mapping of
    setting name to value, with the names as attributes too. Made by a front-end's resolver; immutable."""

    __slots__ = ("_values",)

    def __init__(self, values: Mapping[str, Any]) -> None:
        object.__setattr__(self, "_values", MappingProxyType(dict(values)))

    def __getitem__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise KeyError(f"The job's settings hold no {name!r}: the front-end's resolver fills in the names of "
                           f"b2batch.engine.jobconfig.JOB_SETTINGS (add {name!r} there if the engine, a batch "
                           f"system or the job script needs it)") from None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self[name]
        except KeyError as e:
            raise AttributeError(e.args[0]) from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"A JobConfig is fixed; make another with replace({name}=...)")

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"JobConfig({dict(self._values)!r})"

    def __reduce__(self) -> Any:
        return (JobConfig, (dict(self._values),))

    def replace(self, **changes: Any) -> JobConfig:
        """A copy with ``changes``."""
        return JobConfig({**self._values, **changes})

    def as_dict(self) -> dict[str, Any]:
        """The values as a plain dict (for the node side; values that are not JSON stay as they are)."""
        return dict(self._values)


def job_config(value_of: Any, names: tuple[str, ...] = JOB_SETTINGS, **given: Any) -> JobConfig:
    """A JobConfig with ``given`` values and ``value_of(name)`` for each other name of ``names``: the helper a
    front-end's resolver calls once per job (or once per distinct settings)."""
    return JobConfig({**{name: value_of(name) for name in names if name not in given}, **given})


#: Every name unset (None): the config of jobs the engine made without a front-end (an earlier run's worker
#: jobs, which this run only ends), and a start for tests (``NO_SETTINGS.replace(max_resubmissions=2)``).
NO_SETTINGS = JobConfig(dict.fromkeys(JOB_SETTINGS))
