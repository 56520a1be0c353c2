"""b2luigi's parameter grouping, on b2batch's bundles of tasks: every batch system, not only HTCondor.

A parameter declared with ``grouping=True`` (any parameter class) makes its task class groupable::

    class Simulate(b2batch.Task):
        sample = b2batch.Parameter()
        seed = b2batch.IntParameter(grouping=True)
        max_grouping_size = 10

Tasks of one class that differ only in their grouped parameters (every other parameter equal) form a group.
Up to ``max_grouping_size`` of them that are ready together run one after another in one batch job, a bundle
(:class:`~b2batch.engine.pilots.kinds.BundleSystem`), so 100 such tasks make 10 jobs. Each task of a bundle keeps
its own outputs, logs, exit code and result: one that fails fails alone, and its group mates that succeeded
are done and do not run again. ``--workers`` counts jobs here, as in b2luigi: a group takes one worker.

``max_grouping_size`` is a setting (task attribute, ``set_setting``, ``settings.json``; default 1: no
grouping). A batch system that runs one task per job (a b2luigi ``BatchProcess`` plugin) refuses a grouped
task with one error that says what to change.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

from b2batch.errors import SettingError


@functools.lru_cache(maxsize=None)
def grouped_parameters(cls: type) -> tuple[str, ...]:
    """The names of the parameters of the task class ``cls`` declared with ``grouping=True``; once per class
    (luigi's ``get_params`` walks ``dir(cls)``, and every task of a graph asks)."""
    return tuple(name for name, param in cls.get_params() if getattr(param, "grouping", False))  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Group:
    """Which tasks may share a batch job with a task (those of the same key), and how many at most."""

    key: str
    size: int
    parameters: tuple[str, ...]


def group_of(task: Any, size: int) -> Group | None:
    """The group of ``task`` whose ``max_grouping_size`` is ``size`` (its resolver, ``TaskJobs.group_of``, read
    it), or None when it is not grouped (no grouped parameter, or a size of 1)."""
    names = grouped_parameters(type(task))
    if not names or size <= 1:
        return None
    others = {name: value for name, value in task.to_str_params().items() if name not in names}
    return Group(f"{task.task_family}{json.dumps(others, sort_keys=True)}", size, names)


def refuse(task: Any, group: Group, batch_system: Any) -> SettingError:
    """The error for a grouped task whose batch system runs one task per job (a BatchProcess plugin)."""
    names = " and ".join(repr(name) for name in group.parameters)
    plural = "s" if len(group.parameters) > 1 else ""
    return SettingError(
        f"Task {task}: its parameter{plural} {names} {'have' if plural else 'has'} grouping=True and the setting "
        f"'max_grouping_size' is {group.size}, but its batch_system {getattr(batch_system, '__name__', batch_system)!r}"
        f" is a BatchProcess plugin, which runs one task per job and cannot group tasks. Set max_grouping_size = 1 "
        f"for {task.task_family} (or drop grouping=True), or use a batch system b2batch groups tasks on: local, "
        f"slurm, sge, htcondor or lsf.")


@dataclass(eq=False)
class _Slot:
    running: int = 1  # its tasks that have not ended
    joined: int = 1  # its tasks so far


class Slots:
    """``--workers`` of the graph runner, counted in jobs: a task that runs in a job of its own takes a
    worker, and the tasks of one group started together share one (they become one bundle job)."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.used = 0
        self._of: dict[str, _Slot] = {}  # task id -> its slot
        self._open: dict[str, _Slot] = {}  # group key -> the slot its tasks join while this hand-out lasts

    def begin(self) -> None:
        """A new hand-out of ready tasks: what starts now goes to new jobs."""
        self._open.clear()

    def full(self) -> bool:
        """Whether no task can start: every worker is taken and no group's job of this hand-out has room."""
        return self.used >= self.workers and not self._open

    def take(self, task_id: str, group: Group | None) -> bool:
        """Take a worker for the task (or a place in its group's job of this hand-out); whether there was one."""
        if group is not None:
            slot = self._open.get(group.key)
            if slot is not None and slot.joined < group.size:
                slot.joined += 1
                slot.running += 1
                self._of[task_id] = slot
                if slot.joined == group.size:
                    del self._open[group.key]
                return True
        if self.used >= self.workers:
            return False
        self.used += 1
        slot = self._of[task_id] = _Slot()
        if group is not None and group.size > 1:
            self._open[group.key] = slot
        return True

    def release(self, task_id: str) -> None:
        """The task ended: its worker is free when the last task of its job ended."""
        slot = self._of.pop(task_id, None)
        if slot is None:
            return
        slot.running -= 1
        if slot.running == 0:
            self.used -= 1
            for key in [key for key, open_slot in self._open.items() if open_slot is slot]:
                del self._open[key]  # no task joins a job that has ended
