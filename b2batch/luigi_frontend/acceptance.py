"""Failure budgets: a task that declares ``acceptance`` (the fraction of its requirements that must be complete)
runs once enough of its requirements are complete and the others failed for good, with the inputs that exist.

luigi hands a task out only when every requirement is done. b2batch's graph runner
(:mod:`b2batch.luigi_frontend.runner`) also hands out a task with ``acceptance`` whose requirements are done
or *lost*: failed with no retry ahead, unschedulable, external data that does not exist, or themselves waiting
on lost requirements beyond their own budget. In its job (or here) the task sees only the inputs that exist:
``self.input()`` and the ``get_input_file_names*`` helpers leave the others out, and
``self.missing_requirements()`` names them.
"""

from __future__ import annotations

import math
from typing import Any

import luigi
import luigi.task

from b2batch.errors import SettingError


def acceptance_of(task: Any) -> float | None:
    """The task's ``acceptance`` (None: off, luigi's rule that every requirement must be done); a value that is
    no fraction in (0, 1] stops the run with an error that names the task and the fix."""
    value = getattr(task, "acceptance", None)
    if callable(value):
        value = value()
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise SettingError(f"luigi task {task}: its 'acceptance' is {value!r}, but it must be the fraction of its "
                           f"requirements that must be complete, a number above 0 and at most 1 (e.g. "
                           f"acceptance = 0.95), or None for all of them.")
    return float(value)


def needed(acceptance: float | None, total: int) -> int:
    """How many of ``total`` requirements must be complete."""
    if acceptance is None:
        return total
    return min(total, math.ceil(acceptance * total - 1e-9))


def _present(structure: Any) -> Any:
    """``structure`` of requirements (a task, or lists, tuples and dicts of them) without incomplete tasks."""
    if isinstance(structure, luigi.Task):
        return structure if structure.complete() else None
    if isinstance(structure, dict):
        kept = {key: _present(value) for key, value in structure.items()}
        return {key: value for key, value in kept.items() if value is not None}
    if isinstance(structure, (list, tuple)):
        kept = [value for value in (_present(item) for item in structure) if value is not None]
        return type(structure)(kept) if isinstance(structure, tuple) else kept
    try:  # a generator or another iterable of tasks
        return _present(list(structure))
    except TypeError:
        return structure


def present_inputs(task: Any) -> Any:
    """The outputs of the task's complete requirements, in the shape ``requires()`` gives them (luigi's
    ``input()`` without the requirements that are not complete)."""
    return luigi.task.getpaths(_present(task.requires()))


def missing_requirements(task: Any) -> list[Any]:
    """The task's requirements that are not complete: what it runs without under its ``acceptance``."""
    return [requirement for requirement in luigi.task.flatten(task.requires()) if not requirement.complete()]
