"""``b2luigi.core.task``: the task classes, b2batch's."""

from b2batch import ExternalTask, Task, WrapperTask

__all__ = ["ExternalTask", "Task", "WrapperTask"]
