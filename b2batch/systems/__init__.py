"""Batch systems: they turn the engine's jobs into scheduler commands.

The registry knows the built-in ones, ``auto``, and plugins of the entry-point groups
``b2batch.batch_systems`` and b2luigi's ``b2luigi.batch_systems``. An entry point names either an engine
:class:`~b2batch.engine.BatchSystem` subclass or a b2luigi-style ``BatchProcess`` subclass (which the luigi
front-end adapts to the engine).
"""

from __future__ import annotations

import functools
import importlib
import logging
import shutil
from typing import Any

from b2batch.errors import SettingError

logger = logging.getLogger(__name__)

#: Public (``b2batch.PUBLIC_MODULES``): what code outside b2batch (the b2luigi shim, plugins) may import.
__all__ = ["ENTRY_POINT_GROUPS", "detect", "known_systems", "system_class", "system_name_of"]

ENTRY_POINT_GROUPS = ("b2batch.batch_systems", "b2luigi.batch_systems")

BUILT_IN = {
    "local": "b2batch.systems.local:LocalSystem",
    "slurm": "b2batch.systems.slurm:SlurmSystem",
    "sge": "b2batch.systems.sge:SGESystem",
    "htcondor": "b2batch.systems.htcondor:HTCondorSystem",
    "lsf": "b2batch.systems.lsf:LSFSystem",
    "apptainer": "b2batch.systems.apptainer:ApptainerSystem",
    "test": "b2batch.systems.testing:TestSystem",
}

#: Batch systems of b2luigi that cannot exist outside their home, with why and what to do instead.
UNAVAILABLE = {
    "gbasf2": ("gbasf2 is Belle II's submission tool for the LHC grid (DIRAC); b2batch has no gbasf2 batch "
               "system and cannot submit to the grid",
               "run the task with a batch system b2batch has ({known}), or run this "
               "workflow with b2luigi itself in a Belle II (gbasf2) environment"),
}


def _load(reference: str) -> type:
    module, _, name = reference.partition(":")
    return getattr(importlib.import_module(module), name)


@functools.cache
def _plugins() -> dict[str, Any]:
    import importlib.metadata  # here: ~10-70 ms to import, and only a name no built-in system has needs it

    found: dict[str, Any] = {}
    for group in reversed(ENTRY_POINT_GROUPS):  # b2batch's own entry points win over b2luigi's
        found.update({ep.name: ep for ep in importlib.metadata.entry_points(group=group)})
    return found


def known_systems() -> list[str]:
    """Names the ``batch_system`` setting accepts."""
    return [*BUILT_IN, *sorted(set(_plugins()) - set(BUILT_IN)), "auto"]


def _is_grid_engine_qsub() -> bool:
    """Whether the ``qsub`` on PATH is Grid Engine's (PBS, Torque and Slurm ship commands of that name too)."""
    import subprocess

    try:
        out = subprocess.run(["qsub", "-help"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    first_line = (out.stdout or out.stderr).strip().splitlines()[:1]
    return bool(first_line) and any(word in first_line[0] for word in ("SGE", "GE ", "Grid Engine", "OGS"))


@functools.cache
def detect() -> str:
    """The batch system ``auto`` stands for: the first of bsub, condor_submit, sbatch, Grid Engine's qsub on
    PATH, else local. Which one and why is logged once, before anything is submitted to it."""
    name, why = _detected()
    logger.info("batch_system 'auto' chose %s: %s. Set the setting batch_system (or --batch-system) to choose "
                "another.", name, why)
    return name


def _detected() -> tuple[str, str]:
    for command, name in (("bsub", "lsf"), ("condor_submit", "htcondor"), ("sbatch", "slurm")):
        found = shutil.which(command)
        if found:
            return name, f"{command} is on PATH ({found})"
    if shutil.which("qsub") and _is_grid_engine_qsub():
        return "sge", f"Grid Engine's qsub is on PATH ({shutil.which('qsub')}), and no bsub, condor_submit or sbatch"
    return "local", "none of bsub, condor_submit, sbatch or Grid Engine's qsub is on PATH"


def job_settings_of_all() -> frozenset[str]:
    """Every setting that shapes a job of some built-in batch system, or the worker jobs of pilots and bundles
    (for a front-end that must know whether a task sets none of them)."""
    from b2batch.engine.pilots.unit_pool import WORKER_SETTINGS

    return frozenset(WORKER_SETTINGS).union(*(_load(reference).job_settings for reference in BUILT_IN.values()))


def system_name_of(value: Any) -> str:
    """The name of the batch system ``value`` (a ``batch_system`` setting's value), with ``auto`` resolved (a
    class given as the setting: its name)."""
    if isinstance(value, type):
        return getattr(value, "name", "") or getattr(value, "system_name", "") or value.__name__
    name = str(value)
    return detect() if name == "auto" else name


def system_class(name: str | type, task: Any = None) -> type:
    """The class of the batch system ``name``: an engine BatchSystem or a b2luigi-style BatchProcess
    subclass (a class given directly is returned as it is)."""
    if isinstance(name, type):
        return name
    if name == "auto":
        name = detect()
    if name in BUILT_IN:
        return _load(BUILT_IN[name])
    if name in _plugins():
        return _plugins()[name].load()
    owner = f" of task {task}" if task is not None else ""
    if name in UNAVAILABLE:
        why, fix = UNAVAILABLE[name]
        raise SettingError(f"batch_system {name!r}{owner} is not available: {why}. The setting 'batch_system' is "
                           f"{name!r}; to fix it, {fix.format(known=', '.join(known_systems()))}.")
    raise SettingError(f"Unknown batch_system {name!r}{owner}. Known ones: {', '.join(known_systems())}. "
                       f"Fix the setting 'batch_system', or install the plugin that provides {name!r}.")


def add_to_run(run: Any, value: Any, owner: Any, config: Any, adapt: Any = None, shaping: bool = False,
               feed: Any = None) -> str:
    """Add the batch system ``value`` (a name, ``auto`` or a class) to ``run``, wrapped in pilot or bundle jobs
    when the settings ``config`` (a :class:`~b2batch.engine.jobconfig.JobConfig`) of ``owner`` ask for them; the name the run knows it by. ``adapt(cls)``
    turns a class that is no engine BatchSystem (a front-end's plugin kind) into a factory, or returns None.
    With ``shaping``, a front-end lets the units that set neither pilot_jobs nor tasks_per_job take the shape
    their setting ``job_shape`` asks for (:class:`~b2batch.engine.pilots.shaping_system.ShapingSystem`, known by the system's
    name; the front-end's resolver gives the run's job_shape, from its RunConfig, where the unit sets none).
    ``feed`` (:class:`~b2batch.engine.pilots.shaping_system.Feed`): how the front-end hands its units over, when it holds some
    back."""
    from b2batch.engine import BatchSystem
    from b2batch.engine.pilots.kinds import BundleSystem, PilotSystem
    from b2batch.engine.pilots.shaping_system import ShapingSystem

    cls = system_class(value if isinstance(value, type) else str(value), owner)
    factory = adapt(cls) if adapt is not None and isinstance(cls, type) else None
    if factory is not None:
        system = run.add_system(factory[0], factory[1])
    elif isinstance(cls, type) and issubclass(cls, BatchSystem):
        if shaping:
            system = run.add_system(cls.name, lambda run: ShapingSystem(run, cls(run), feed))
        else:
            system = run.add_system(cls.name, cls)
    else:
        raise SettingError(f"Task {owner}: the batch_system {value!r} is not an engine BatchSystem subclass"
                           f"{' (nor a b2batch.BatchProcess)' if adapt is not None else ''}; fix the setting "
                           f"'batch_system' or the plugin.")
    pilots, per_job = config["pilot_jobs"], config["tasks_per_job"]
    if not pilots and per_job <= 1:
        return system.name
    if factory is not None:
        raise SettingError(f"Task {owner}: the batch_system {value!r} is a BatchProcess plugin, which runs one task "
                           f"per job; unset pilot_jobs ({pilots}) and tasks_per_job ({per_job}) for it.")
    pooled = PilotSystem if pilots else BundleSystem
    inner = system.inner if isinstance(system, ShapingSystem) else system
    return run.add_system(f"{inner.name}-{pooled.kind}s", lambda run: pooled(run, inner)).name
