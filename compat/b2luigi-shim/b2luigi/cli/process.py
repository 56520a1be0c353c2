"""``b2luigi.cli.process``: ``process``, b2batch's, and b2luigi's ``build``: luigi's ``build`` with a
``UserWarning`` that ``process()`` is the entry point meant (b2luigi's settings, --batch and the other flags
work only there)."""

from __future__ import annotations

import functools
import warnings
from typing import Any

import luigi

from b2batch import process

__all__ = ["build", "process"]


@functools.wraps(luigi.build)
def build(*args: Any, **kwargs: Any) -> Any:
    warnings.warn("b2luigi.build() runs the tasks with plain luigi.build(): the command-line flags (--batch, "
                  "--dry-run, ...) and batch systems of b2luigi.process() do not apply. Call b2luigi.process() "
                  "instead.", UserWarning, stacklevel=2)
    return luigi.build(*args, **kwargs)
