"""b2luigi's batch worker: one task of the graph run here, as the job b2luigi submitted for it runs it.

``python tasks.py --batch-runner --task-id <id>`` (the command of b2luigi's ``executable_wrapper.sh``) and
``b2luigi batch-runner --classname ...`` come here: the task's output folders are made, its ``run()`` called
in this process (a dispatchable task runs its ``process()`` here too), then ``on_success()``; when ``run()``
raises, ``on_failure(exception)`` is called and the exception raised again, so the process ends with a
traceback and exit status 1. Nothing is asked of a scheduler and the requirements are not checked, as in
b2luigi.

What b2batch adds: outputs left by a failed ``run()`` are removed (they may be partial and would count as
complete later), and a ``run()`` that yields dynamic requirements is driven as luigi's worker drives it (a
requirement not complete is an error: the worker runs only its own task).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import luigi.task

from b2batch.luigi_frontend.b2luigi_cli import task_iterator
from b2batch.settings import set_setting

#: Public (``b2batch.PUBLIC_MODULES``): what code outside b2batch (the b2luigi shim, plugins) may import.
__all__ = ["run_here", "run_task_of_id"]

logger = logging.getLogger(__name__)


def run_here(task: Any) -> None:
    """Run ``task`` in this process as b2luigi's batch worker does (see the module's description)."""
    set_setting("_dispatch_local_execution", True)  # a dispatchable task runs here, not in a child
    try:
        for target in luigi.task.flatten(task.output()):
            if hasattr(target, "makedirs"):
                target.makedirs()
        _drive(task, task.run())
        task.on_success()
    except BaseException as error:
        task.on_failure(error)
        _discard_outputs(task)
        raise


def run_task_of_id(tasks: Iterable[Any], task_id: str) -> None:
    """:func:`run_here` for the task of id ``task_id`` among ``tasks`` and all they require; a ``ValueError``
    (b2luigi's text) when the graph has no such task."""
    for task in task_iterator(tasks):
        if task.task_id == task_id:
            run_here(task)
            return
    raise ValueError(f"The task id {task_id} to be executed by this batch worker does not exist in the locally "
                     f"reproduced task graph.")


def _drive(task: Any, returned: Any) -> None:
    """A ``run()`` that is a generator: each batch of requirements it yields must be complete; it gets their
    outputs back, as from luigi's worker."""
    if not hasattr(returned, "send") or not hasattr(returned, "__next__"):
        return
    answer = None
    while True:
        try:
            yielded = returned.send(answer)
        except StopIteration:
            return
        requirements = luigi.task.flatten(yielded)
        missing = [str(r) for r in requirements if not r.complete()]
        if missing:
            raise RuntimeError(f"{task} requires at run time {', '.join(missing)}, which is not complete; a batch "
                               f"worker runs only its own task: run the workflow to make them first.")
        answer = luigi.task.getpaths(yielded)


def _discard_outputs(task: Any) -> None:
    """Remove the outputs ``task`` has (its failed run may have left them partial); a line on the log says so."""
    removed = []
    try:
        for target in luigi.task.flatten(task.output()):
            if target.exists():
                target.remove()
                removed.append(str(getattr(target, "path", target)))
    except Exception as error:  # noqa: BLE001 - the task's own error is the one to report
        logger.warning("Task %s failed; its outputs could not all be removed: %s", task, error)
    if removed:
        logger.warning("Task %s failed; its outputs may be partial and do not count: removed %s", task,
                       ", ".join(removed))
