"""Python calls as batch jobs: the engine's front-end for functions (joblib, ``b2batch.Pool``).

- :class:`~b2batch.calls.executor.Executor`: submits lists of calls as jobs of one run, futures back.
- :mod:`b2batch.calls.calls_on_node`: what a job runs: the calls, their values or the exception written back.
"""

from __future__ import annotations

from b2batch.lazy_names import lazy_names

#: Each public name and its module, imported when first used (a job's ``calls_on_node`` needs no executor).
_MODULE_OF = {"CallFuture": "b2batch.calls.futures", "CallJobError": "b2batch.calls.futures",
              "Executor": "b2batch.calls.executor", "RemoteTraceback": "b2batch.calls.futures",
              "as_completed": "b2batch.calls.futures"}

__all__ = ["CallFuture", "CallJobError", "Executor", "RemoteTraceback", "as_completed", "pickling"]


__getattr__, __dir__ = lazy_names(__name__, globals(), _MODULE_OF, {"pickling": "b2batch.calls.pickling"})
