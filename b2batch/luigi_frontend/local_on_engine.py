"""Runs without ``--batch`` through the engine (issue 44; the setting ``local_runs_on_engine``).

luigi's own worker asks its scheduler about the whole graph for every task it hands out and starts a process per
task; a run of many short tasks spends its time there. A local run therefore goes through the same graph runner
and engine as a batch run, on the ``local`` batch system: with ``job_shape`` auto (and no explicit
``pilot_jobs`` or ``tasks_per_job``), ``--workers`` local pilots pull the ready tasks, and the graph runner hands
out every ready task at once (the pilots bound how many run).

What a luigi user sees stays: luigi's execution summary and exit codes (the graph runner's, as in a batch run);
the tasks' events ``START``, ``SUCCESS`` and ``FAILURE`` fire in the script's own process (:func:`started`,
:func:`ended`), not in the pilot that ran the task, which is told not to fire them (the spec's
``events_in_steering``); a failed task's traceback is logged here, as in a batch run (the engine's ERROR line
with the job's explanation). ``PROCESSING_TIME`` does not fire (the pilot knows the time, this process does
not); a task's own output goes into its pilot's logs (the setting ``unit_logs`` auto), its part named in a
failure. What stays with luigi's worker: ``--test`` (tasks run in
this process, output on the terminal), a central scheduler (``luigid``), the b2luigi profile (b2luigi runs
local tasks in luigi's worker), graphs with a task that names its own ``batch_system``, and graphs with a task
class a job cannot load (:func:`jobs_can_load`).
"""

from __future__ import annotations

import os
import site
import sys
import sysconfig
from typing import Any

import luigi
from luigi.scheduler import DONE, FAILED

from b2batch.luigi_frontend.b2luigi_cli import task_iterator

#: A very large number of graph-runner slots: with pilots, they bound how many tasks run at once.
UNBOUNDED = 10**9

class TaskFailedInJob(Exception):
    """The exception a ``FAILURE`` event handler gets for a task that failed in a local job: its message is what
    the job said (the task's traceback), since the original exception lived in another process."""


def goes_through_engine(tasks: list[Any], script: str | None, *, enabled: bool, batch: bool, test: bool,
                        build_params: dict[str, Any], names_own_system: Any) -> bool:
    """Whether this run without ``--batch`` goes through the engine: ``enabled`` (the setting
    ``local_runs_on_engine``), no ``--test``, the local scheduler, every task class loadable by a job
    (:func:`jobs_can_load`: luigi's worker forks, a job imports) and no task of the graph with a ``batch_system``
    of its own (``names_own_system(tasks, walked)``, given the graph's tasks walked)."""
    if not enabled or batch or test or not build_params.get("local_scheduler", True):
        return False
    try:
        walked = list(task_iterator(tasks))
    except Exception:  # a requires() that raises: luigi's worker reports it when it schedules the task
        return False
    return jobs_can_load({type(task) for task in walked}, script) and not names_own_system(tasks, walked)


def jobs_can_load(classes: set[type], script: str | None) -> bool:
    """Whether a job can load each of the task ``classes``: defined at the top level of the script that is run
    again (``__main__``), or of a module that a job imports from the script's folder, ``PYTHONPATH`` or the
    installed packages. Not: classes defined in a function, in an interactive session, or in modules that
    only this process finds (a test module pytest put on ``sys.path``)."""
    roots = {os.path.realpath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p}
    roots |= {os.path.realpath(p) for p in sysconfig.get_paths().values()}
    roots |= {os.path.realpath(p) for p in site.getsitepackages() + [site.getusersitepackages()]}
    if script:
        roots.add(os.path.dirname(os.path.realpath(script)))
    for cls in classes:
        if "<locals>" in cls.__qualname__:
            return False
        module = sys.modules.get(cls.__module__)
        file = getattr(module, "__file__", None)
        if not file:
            return False
        if cls.__module__ == "__main__":
            if not script or os.path.realpath(file) != os.path.realpath(script):
                return False
            continue
        depth = cls.__module__.count(".") + (2 if os.path.basename(file) == "__init__.py" else 1)
        root = os.path.realpath(file)
        for _level in range(depth):
            root = os.path.dirname(root)
        if root not in roots:
            return False
    return True


def engine_config(config: Any, workers: int, shaped: bool) -> Any:
    """The run's configuration for a local run on the engine: the local batch system and, unless the settings
    shape jobs themselves (``job_shape`` other than auto; ``shaped``: ``pilot_jobs`` or ``tasks_per_job`` set),
    ``workers`` pilots per task family; the local batch system runs at least ``workers`` jobs at once."""
    flags = dict(config.flags)
    if config.job_shape == "auto" and not shaped:
        flags["pilot_jobs"] = max(1, int(workers))
    # --workers tasks at once, as luigi's worker runs them, also beyond the CPUs (local_slots' default)
    slots = max(int(config.local_slots or os.cpu_count() or 1), int(workers))
    # a killed run leaves no pilot running its task, as luigi's worker leaves no task process (a rerun redoes it)
    # a task's output goes into its pilot's logs (unit_logs auto): no log folder per task, as luigi's worker makes
    # none; a failed task's message quotes its part
    logs = "pilot" if config.unit_logs == "auto" else config.unit_logs
    return config.replace(batch_system="local", flags=flags, local_slots=slots, workers_end_with_steering=True,
                          unit_logs=logs)


def graph_workers(config: Any, workers: int) -> int:
    """The graph runner's slots: unbounded when pilots run the tasks (they bound them), else ``workers``."""
    return UNBOUNDED if config.flags.get("pilot_jobs") else workers


def started(task: Any) -> None:
    """The task was handed to the engine: its ``START`` event, here."""
    task.trigger_event(luigi.Event.START, task)


def ended(task: Any, status: str, explanation: str) -> None:
    """The task's job ended: ``SUCCESS``, or ``FAILURE`` with what the job said (the engine has logged it, with
    the task's traceback)."""
    if status == DONE:
        task.trigger_event(luigi.Event.SUCCESS, task)
    elif status == FAILED:
        task.trigger_event(luigi.Event.FAILURE, task, TaskFailedInJob(explanation.rstrip()))


def no_event(*args: Any, **kwargs: Any) -> None:
    """A task's ``trigger_event`` in a job whose events fire in the steering process."""
