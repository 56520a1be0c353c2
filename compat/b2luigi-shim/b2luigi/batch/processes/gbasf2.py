"""``b2luigi.batch.processes.gbasf2``: ``Gbasf2Process``, which cannot exist outside Belle II's grid.

Using it (or ``batch_system = "gbasf2"``) stops with one error that says why and what to do instead.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Gbasf2Process"]


class Gbasf2Process:
    """b2luigi's batch process for Belle II's grid; making one raises b2batch's error for ``gbasf2``."""

    name = "gbasf2"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        from b2batch.systems import system_class

        system_class("gbasf2", kwargs.get("task"))  # raises the SettingError that explains it
