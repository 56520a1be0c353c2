"""Registering the backend with joblib: ``b2batch`` for the backend itself, ``htcondor`` for code written for
joblib-htcondor (``from b2batch.joblib import register_htcondor; register_htcondor()``)."""

from __future__ import annotations

import logging
from typing import Any

from joblib.parallel import register_parallel_backend

from b2batch.joblib.backend import B2BatchBackend

#: The name under which ``import b2batch.joblib`` registers :class:`B2BatchBackend`.
NAME = "b2batch"


class HTCondorBackend(B2BatchBackend):
    """joblib-htcondor's backend on b2batch: ``batch_system`` defaults to ``htcondor`` and task files to
    ``./joblib_htcondor_shared_data``, as there; every other batch system works too (``batch_system=...``)."""

    default_shared_data_dir = "joblib_htcondor_shared_data"
    frontend_name = "the joblib backend htcondor (joblib-htcondor on b2batch)"

    def __init__(self, nesting_level: int | None = None, inner_max_num_threads: int | None = None,
                 **parameters: Any) -> None:
        parameters.setdefault("batch_system", "htcondor")
        super().__init__(nesting_level=nesting_level, inner_max_num_threads=inner_max_num_threads, **parameters)


def register(name: str = NAME, make_default: bool = False) -> None:
    """Register the backend as ``name`` (``parallel_config(backend="b2batch", ...)``)."""
    register_parallel_backend(name, B2BatchBackend, make_default=make_default)


def register_htcondor(level: int | str = "WARNING") -> None:
    """joblib-htcondor's ``register_htcondor``: the backend ``htcondor``, and the level of this package's log
    messages (a handler on stderr is added if the root logger has none)."""
    register_parallel_backend("htcondor", HTCondorBackend)
    log = logging.getLogger("b2batch.joblib")
    log.setLevel(level.upper() if isinstance(level, str) else level)
    if not logging.getLogger().handlers and not log.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
        log.addHandler(handler)
