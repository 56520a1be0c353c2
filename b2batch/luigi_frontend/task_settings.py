"""A luigi task's settings as its job has them, resolved once per task (and once per task class whose tasks set
none themselves): its batch system, job shape, parameter group and :class:`JobConfig`.

:class:`TaskSettings` belongs to one run (:class:`b2batch.luigi_frontend.jobs.TaskJobs` asks it). Precedence: the
task's attribute or method, the run's flags, set_setting, the settings files, the profile's defaults.
"""

from __future__ import annotations

import functools
from typing import Any

from b2batch import systems
from b2batch.engine import Run
from b2batch.engine.jobconfig import JOB_SETTINGS, JobConfig
from b2batch.luigi_frontend import checkpoint
from b2batch.luigi_frontend.batch_process import BatchProcess
from b2batch.luigi_frontend.grouping import Group, group_of, grouped_parameters, refuse
from b2batch.luigi_frontend.task_systems import batch_system_of, runs_as_job
from b2batch.settings import get_setting
from b2batch.settings.resolve import resolve_job_config, resolve_setting


@functools.cache
def _job_settings() -> frozenset[str]:
    return systems.job_settings_of_all()


def _settings_key(task: Any, classes: dict[type, bool]) -> Any:
    """The task's class when neither it nor the task sets any of the settings that shape a job (they then come
    from set_setting and settings.json alone, the same for every such task of the run); else None. ``classes``
    keeps, per class, whether the class sets one (looked at once per class and run)."""
    cls = type(task)
    sets = classes.get(cls)
    if sets is None:
        sets = classes[cls] = any(hasattr(cls, name) for name in _job_settings())
    if sets or (vars(task).keys() & _job_settings()):
        return None
    return cls


_JOB_SETTING_NAMES = frozenset(JOB_SETTINGS)


def _own_names(task: Any, classes: dict[type, frozenset[str]]) -> frozenset[str]:
    """The names of :data:`JOB_SETTINGS` that the task or its class has (an attribute, property or method): the
    ones resolved for each task; the others are the run's, the same for every task. ``classes`` keeps them per
    class."""
    cls = type(task)
    names = classes.get(cls)
    if names is None:
        names = classes[cls] = frozenset(name for name in JOB_SETTINGS if hasattr(cls, name))
    mine = vars(task).keys() & _JOB_SETTING_NAMES
    return names | mine if mine else names


class TaskSettings:
    """The settings of one run's luigi tasks, resolved once each."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self._groups: dict[str, Group | None] = {}  # b2luigi's parameter groups, by task id
        self._classes: dict[type, bool] = {}  # whether a task class sets a setting that shapes jobs
        self._config_classes: dict[type, frozenset[str]] = {}  # the names of JOB_SETTINGS a task class has
        #: The JobConfigs of tasks whose settings come from the class alone, by (class, group size): resolved once
        #: per class (and group size) and run, however many tasks it has.
        self._configs: dict[Any, JobConfig] = {}
        self._shared: JobConfig | None = None  # the names no task sets itself, as the run's flags and chain have them

    def settings_key(self, task: Any) -> Any:
        """:func:`_settings_key` with this run's look at the task classes."""
        return _settings_key(task, self._classes)

    def group_of(self, task: Any) -> Group | None:
        """The parameter group of ``task`` (None: not grouped), looked up once per task; a grouped task whose
        batch system runs one task per job, or a wrong max_grouping_size, raises a SettingError."""
        if task.task_id in self._groups:
            return self._groups[task.task_id]
        group = None
        if grouped_parameters(type(task)):  # a wrong max_grouping_size raises the setting's SettingError
            group = group_of(task, get_setting("max_grouping_size", task=task))
        if group is not None:
            value = self.batch_system_of(task)
            cls = systems.system_class(value if isinstance(value, type) else str(value), task)
            if issubclass(cls, BatchProcess) and not cls.engine_system:  # b2luigi's SlurmProcess ... group
                raise refuse(task, group, value)
        self._groups[task.task_id] = group
        return group

    def config_of(self, task: Any) -> JobConfig:
        """The luigi front-end's resolver: the task's settings as its job has them, resolved once (and once per
        task class whose tasks set none themselves). Precedence: the task's attribute or method, the run's flags
        (its batch_system: the task's own, else --batch-system, else the chain), set_setting, the settings files,
        the profile's defaults; a group's size is its tasks_per_job; a task that can checkpoint gets the batch
        system's warning in its submit options."""
        group = self.group_of(task)
        own = _own_names(task, self._config_classes)
        cache = (type(task), group.size if group is not None else None) if not own else None
        config = self._configs.get(cache) if cache is not None else None
        if config is None:
            if self._shared is None:  # what a task that sets nothing itself has: resolved once per run
                self._shared = resolve_job_config(None, self.run.config.flags)
            flags = self.run.config.flags
            given = {name: resolve_setting(task, name, flags) for name in own}  # the task's own, checked
            given.update(batch_system=self.batch_system_of(task), job_shape=self.job_shape_of(task))
            if group is not None:
                given["tasks_per_job"] = group.size
            config = self._shared.replace(**given)
            if checkpoint.can_checkpoint(task):
                seconds = int(get_setting("checkpoint_warning", task=task))
                warned = {name: checkpoint.with_warning(task, name, config[name], seconds)
                          for name in checkpoint.WARNING_SETTINGS}
                if any(warned[name] is not config[name] for name in warned):
                    config = config.replace(**warned)
            if cache is not None:
                self._configs[cache] = config
        return config

    def job_shape_of(self, task: Any) -> str:
        """The task's job_shape: ``job_per_task`` where pilot_jobs or tasks_per_job is set for it (0 and 1: their
        values win, as before job_shape existed), else its own job_shape, else the run's (its RunConfig)."""
        if any(get_setting(name, None, task=task) is not None for name in ("pilot_jobs", "tasks_per_job")):
            return "job_per_task"
        return get_setting("job_shape", self.run.config.job_shape, task=task)

    def batch_system_of(self, task: Any) -> Any:
        """The task's batch_system: its own, else the run's (the setting or --batch-system)."""
        return batch_system_of(task, self.run.config.batch_system)

    def runs_as_job(self, task: Any) -> bool:
        """:func:`runs_as_job` with this run's batch_system."""
        return runs_as_job(task, self.run.config.batch_system)
