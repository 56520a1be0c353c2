"""``batch_system = "custom"``: b2luigi's way to name a batch system of one's own, a ``BatchProcess`` subclass
given as the task's ``process_class`` attribute.

:class:`CustomProcess` is what the name ``custom`` stands for (an entry point of ``b2luigi.batch_systems``, which
the shim registers): b2batch drives it as a batch system, and it makes each task's process of the task's own
``process_class``. A task without one stops with b2luigi's ``AttributeError``.
"""

from __future__ import annotations

from typing import Any

from b2luigi.batch.processes import BatchProcess

__all__ = ["CustomProcess", "process_class_of"]


def process_class_of(task: Any) -> type[BatchProcess]:
    """The task's ``process_class``; b2luigi's ``AttributeError`` without one."""
    if not hasattr(task, "process_class"):
        raise AttributeError("The task object does not have a 'process_class' attribute. Please ensure the task "
                             "defines this attribute.")
    return task.process_class


class CustomProcess(BatchProcess):
    """The ``custom`` batch system: each task's job is a process of the task's ``process_class``."""

    name = system_name = "custom"

    @classmethod
    def for_task(cls, task: Any) -> BatchProcess:
        return process_class_of(task)(task=task)

    def start_job(self) -> None:  # never called: for_task makes the task's own process
        raise NotImplementedError("batch_system 'custom' runs the task's process_class")

    def get_job_status(self) -> Any:
        raise NotImplementedError("batch_system 'custom' runs the task's process_class")
