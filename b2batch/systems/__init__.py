"""The registry of batch systems: built-in ones, ``auto``, and plugins of the entry-point group
``b2batch.batch_systems`` (each entry point names a :class:`b2batch.process.BatchProcess` subclass)."""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import logging
import shutil
import subprocess
from typing import Any

from b2batch.errors import SettingError
from b2batch.settings import get_setting

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "b2batch.batch_systems"

BUILT_IN = {
    "local": "b2batch.systems.local:LocalProcess",
    "slurm": "b2batch.systems.slurm:SlurmProcess",
    "sge": "b2batch.systems.sge:SGEProcess",
    "htcondor": "b2batch.systems.htcondor:HTCondorProcess",
    "lsf": "b2batch.systems.lsf:LSFProcess",
}


def _load(reference: str) -> type:
    module, _, name = reference.partition(":")
    return getattr(importlib.import_module(module), name)


@functools.cache
def _plugins() -> dict[str, Any]:
    return {ep.name: ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}


def known_systems() -> list[str]:
    """Names the ``batch_system`` setting accepts."""
    return [*BUILT_IN, *sorted(set(_plugins()) - set(BUILT_IN)), "auto"]


def _is_grid_engine_qsub() -> bool:
    """Whether the ``qsub`` on PATH is Grid Engine's (PBS, Torque and Slurm ship commands of that name too)."""
    try:
        out = subprocess.run(["qsub", "-help"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    first_line = (out.stdout or out.stderr).strip().splitlines()[:1]
    return bool(first_line) and any(word in first_line[0] for word in ("SGE", "GE ", "Grid Engine", "OGS"))


@functools.cache
def detect() -> str:
    """The batch system ``auto`` stands for: the first of bsub, condor_submit, sbatch, Grid Engine's qsub on
    PATH, else local."""
    for command, name in (("bsub", "lsf"), ("condor_submit", "htcondor"), ("sbatch", "slurm")):
        if shutil.which(command):
            return name
    if shutil.which("qsub") and _is_grid_engine_qsub():
        return "sge"
    return "local"


def system_name_of(task: Any) -> str:
    """The batch system the task runs on, with ``auto`` resolved."""
    name = str(get_setting("batch_system", task=task))
    return detect() if name == "auto" else name


def process_class(name: str, task: Any = None) -> type:
    """The BatchProcess class of the batch system ``name``."""
    if name == "auto":
        name = detect()
    if name in BUILT_IN:
        return _load(BUILT_IN[name])
    if name in _plugins():
        return _plugins()[name].load()
    owner = f" of task {task}" if task is not None else ""
    raise SettingError(f"Unknown batch_system {name!r}{owner}. Known ones: {', '.join(known_systems())}. "
                       f"Fix the setting 'batch_system', or install the plugin that provides {name!r}.")
