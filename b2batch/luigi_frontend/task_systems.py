"""Which luigi tasks become jobs, on which batch system, and how a job loads a task's module."""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from typing import Any

import luigi

from b2batch import systems
from b2batch.settings import active_profile, get_setting


@functools.lru_cache(maxsize=64)
def module_file(name: str) -> str | None:
    """The file of the loaded module ``name`` when it was loaded from a file under another name (b2luigi's
    command imports ``tasks.py`` as ``TaskClasses``): a job cannot import it by its name, it loads the file.
    None for modules found by their name (and for ``__main__``)."""
    file = getattr(sys.modules.get(name), "__file__", None)
    if name == "__main__" or not file or Path(file).stem in ("__init__", name.rpartition(".")[2]):
        return None
    return os.path.abspath(file)


def batch_system_of(task: Any, run_value: Any = None) -> Any:
    """The task's ``batch_system``: its own (an attribute or a method of it or its class), else ``run_value``
    (the run's: the setting or --batch-system, from its RunConfig), else the settings chain's."""
    own = getattr(task, "batch_system", None)
    if callable(own) and getattr(own, "__self__", None) is task:
        own = own()
    if own is not None:
        return own
    return run_value if run_value is not None else get_setting("batch_system", task=task)


def runs_as_job(task: Any, run_batch_system: Any = None) -> bool:
    """Whether the task becomes a job: not for external tasks (nothing to run), wrapper tasks (only
    requirements), tasks that ask to stay with ``run_local = True``, and, for a workflow written against
    b2luigi, tasks whose batch system is ``local`` (b2luigi runs those in luigi's worker process);
    ``run_batch_system`` is the run's batch_system (None: the settings chain's)."""
    if getattr(task, "run_local", False):
        return False
    if isinstance(task, luigi.WrapperTask):
        return False
    if getattr(type(task), "run", None) is None:
        return False
    return not (active_profile() == "b2luigi" and _local_system(task, run_batch_system))


def _local_system(task: Any, run_batch_system: Any = None) -> bool:
    """Whether the task's batch system is ``local`` (a bad setting is not: the job's checks name it)."""
    try:
        return systems.system_name_of(batch_system_of(task, run_batch_system)) == "local"
    except Exception:
        return False
