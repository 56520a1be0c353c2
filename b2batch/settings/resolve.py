"""The one resolver front-ends share: a unit's settings (a task, a call executor, a farm) turned into a frozen
:class:`~b2batch.engine.jobconfig.JobConfig` once, when its job is made.

Precedence (b2batch's profile, :mod:`b2batch.settings`): the unit's own attribute, property or method, then the
run's flags (``RunConfig.flags``; ``given`` here), then ``set_setting``, then the settings files, then the
profile's defaults. b2luigi's profile reads the same chain with its own defaults and file rules (b2luigi's layer
chooses the profile; its tasks then go through the luigi front-end's resolver). A front-end passes what it
decided itself (the task's batch system, a group's size) as ``given``."""

from __future__ import annotations

from typing import Any

from b2batch.engine.jobconfig import JOB_SETTINGS, JobConfig, job_config
from b2batch.settings import _NOT_SET, _from_task, get_setting, settings_snapshot


def own_value(owner: Any, name: str) -> Any:
    """The value ``owner`` sets for ``name`` itself (attribute, property or method), else ``_NOT_SET``."""
    return _from_task(owner, name)


def resolve_setting(owner: Any, name: str, flags: Any = None) -> Any:
    """The value of ``name`` for ``owner`` by the precedence above (``flags``: the run's flags)."""
    if flags and name in flags and own_value(owner, name) is _NOT_SET:
        return flags[name]
    return get_setting(name, task=owner)


def resolve_job_config(owner: Any, flags: Any = None, names: tuple[str, ...] = JOB_SETTINGS,
                       **given: Any) -> JobConfig:
    """The JobConfig of ``owner``'s jobs: ``given`` values as they are, then for every other name of ``names``
    the owner's own value, the run's ``flags``, then the settings chain (:func:`get_setting`)."""
    flags = flags or {}

    def value_of(name: str) -> Any:
        return resolve_setting(owner, name, flags)

    files = given.pop("settings_files", None)
    return job_config(value_of, names, settings_files=tuple(settings_snapshot()["files"] if files is None else files), **given)
