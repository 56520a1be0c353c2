"""``b2luigi.core.task``: the task classes, b2batch's."""

from b2batch.task import ExternalTask, Task, WrapperTask

__all__ = ["ExternalTask", "Task", "WrapperTask"]
