"""Python calls as batch jobs: the engine's front-end for functions (joblib, ``b2batch.Pool``).

- :class:`~b2batch.calls.executor.Executor`: submits lists of calls as jobs of one run, futures back.
- :mod:`b2batch.calls.calls_on_node`: what a job runs: the calls, their values or the exception written back.
"""

from b2batch.calls import pickling
from b2batch.calls.executor import CallFuture, CallJobError, Executor, RemoteTraceback, as_completed

__all__ = ["CallFuture", "CallJobError", "Executor", "RemoteTraceback", "as_completed", "pickling"]
