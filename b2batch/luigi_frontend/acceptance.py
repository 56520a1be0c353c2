"""Failure budgets: a task that declares ``acceptance`` (the fraction of its requirements that must be complete)
runs once enough of its requirements are complete and the others failed for good, with the inputs that exist.

luigi hands a task out only when every requirement is done. b2batch's graph runner
(:mod:`b2batch.luigi_frontend.graph_runner`) also hands out a task with ``acceptance`` whose requirements are done
or *lost*: failed with no retry ahead, unschedulable, external data that does not exist, or themselves waiting
on lost requirements beyond their own budget. In its job (or here) the task sees only the inputs that exist:
``self.input()`` and the ``get_input_file_names*`` helpers leave the others out, and
``self.missing_requirements()`` names them.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import luigi
import luigi.task
from luigi.scheduler import PENDING

from b2batch.errors import SettingError

logger = logging.getLogger(__name__)


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


class FailureBudgets:
    """The graph runner's bookkeeping of lost requirements (mixed into
    :class:`~b2batch.luigi_frontend.graph_runner.GraphRunner`, whose nodes have ``acceptance``, ``lost`` and
    ``lost_deps``): each node is lost at most once and each edge counted once, so budgets cost O(edges)."""

    jobs: Any

    def _push(self, node: Any) -> None:  # the runner's ready set
        raise NotImplementedError

    @staticmethod
    def _within_budget(node: Any) -> bool:
        """Whether enough of the node's requirements can still be done for its ``acceptance``."""
        if node.acceptance is None:
            return node.lost_deps == 0
        return len(node.deps) - node.lost_deps >= needed(node.acceptance, len(node.deps))

    def _lose(self, node: Any) -> None:
        """``node`` will not be done in this run: its dependents count it lost, and those without a budget for it
        are lost too (they stay pending, as under luigi's scheduler); those with one may now be ready."""
        stack = [node]
        while stack:
            current = stack.pop()
            if current.lost:
                continue
            current.lost = True
            for dependent in current.dependents:
                dependent.lost_deps += 1
                if dependent.status != PENDING or not dependent.runnable or dependent.queued or dependent.lost:
                    continue
                if not self._within_budget(dependent):
                    stack.append(dependent)
                elif dependent.waiting_on - dependent.lost_deps == 0:
                    dependent.queued = True
                    self._push(dependent)

    def _note_without(self, node: Any) -> None:
        """Say (log, summary, report) which requirements a task with a failure budget runs without."""
        without = [dep.task for dep in node.deps if dep.lost]
        total, task = len(node.deps), node.task
        logger.warning("Task %s runs without %d of its %d requirements (acceptance = %g): %s", task, len(without),
                       total, node.acceptance, ", ".join(map(str, without)))
        entries = self.jobs.policies.setdefault("acceptance", [])
        entries[:] = [e for e in entries if e["task_id"] != task.task_id]  # once per task (a retry runs again)
        entries.append({"task_id": task.task_id, "task": str(task), "acceptance": node.acceptance,
                        "requirements": total, "without": [str(t) for t in without],
                        "text": f"{task} ran without {len(without)} of {total} requirements (acceptance "
                                f"{node.acceptance:g}): {', '.join(map(str, without))}"})
