"""``b2luigi.core.dispatchable_task``: ``dispatch`` and ``DispatchableTask``, b2batch's."""

from b2batch.luigi_frontend.dispatching import DispatchableTask, dispatch

__all__ = ["DispatchableTask", "dispatch"]
