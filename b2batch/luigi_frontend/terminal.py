"""Lists on the terminal with rich, in b2luigi's layout where b2luigi has one (``--dry-run``, ``--remove``)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.text import Text


def terminal() -> Console:
    """rich's console for b2batch's lists; into a file or a pipe, lines are not cut (paths stay whole)."""
    return Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 100_000)


def per_family(console: Console, by_family: dict[str, list[Any]], verb: str, method: str,
               otherwise: Callable[[Any], None] | None = None) -> None:
    """As b2luigi: per task family (sorted), each task as ``<tab><verb> <task>``, then its method ``method``
    called after ``<tab>call: <method>()`` if it has one (else ``otherwise(task)``)."""
    for family in sorted(by_family):
        console.print(Text(family, style="bold"))
        for task in by_family[family]:
            console.print(Text(f"\t{verb} {task}"))
            if hasattr(task, method):
                console.print(f"\tcall: {method}()")
                getattr(task, method)()
            elif otherwise is not None:
                otherwise(task)
            console.print()
