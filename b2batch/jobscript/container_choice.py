"""Whether a job's settings put it in a container: looked at for every job's wrapper, so apart from
:mod:`b2batch.jobscript.containers` (which builds and checks the container's command, and is imported only for a
job that has one)."""

from __future__ import annotations

from typing import Any


def system_name(value: Any) -> str:
    """The name of a ``batch_system`` setting's value: a name, or a batch system's class."""
    if isinstance(value, type):
        return str(getattr(value, "name", "") or getattr(value, "system_name", "") or value.__name__)
    return str(value)


def wanted(config: Any) -> bool:
    """Whether the settings ``config`` (a JobConfig) run jobs in a container (without checking them)."""
    return bool(config["container"] or config["apptainer_image"] or system_name(config["batch_system"]) == "apptainer")
