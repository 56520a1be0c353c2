"""``b2luigi.core.dispatchable_task``: ``dispatch`` and ``DispatchableTask``, b2batch's."""

from b2batch import DispatchableTask, dispatch

__all__ = ["DispatchableTask", "dispatch"]
