"""``b2luigi.batch.processes``: ``BatchProcess`` and ``JobStatus``, b2batch's.

They are looked up on the ``b2batch`` package when first asked for, wherever b2batch defines them.
"""

from __future__ import annotations

from typing import Any

__all__ = ["BatchProcess", "JobStatus"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        import b2batch

        return getattr(b2batch, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
