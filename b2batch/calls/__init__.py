"""Python calls as batch jobs: the engine's front-end for functions (joblib, ``b2batch.Pool``).

- :class:`~b2batch.calls.executor.Executor`: submits lists of calls as jobs of one run, futures back.
- :mod:`b2batch.calls.calls_on_node`: what a job runs: the calls, their values or the exception written back.
"""

from __future__ import annotations

import importlib
from typing import Any

#: Each public name and its module, imported when first used (a job's ``calls_on_node`` needs no executor).
_MODULE_OF = {"CallFuture": "b2batch.calls.executor", "CallJobError": "b2batch.calls.executor",
              "Executor": "b2batch.calls.executor", "RemoteTraceback": "b2batch.calls.executor",
              "as_completed": "b2batch.calls.executor"}

__all__ = ["CallFuture", "CallJobError", "Executor", "RemoteTraceback", "as_completed", "pickling"]


def __getattr__(name: str) -> Any:
    if name == "pickling":
        return importlib.import_module("b2batch.calls.pickling")
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'b2batch.calls' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_MODULE_OF, "pickling"})
