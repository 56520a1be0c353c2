"""Writing a run's JSON files (timeline, report) without holding them in memory twice.

A run of 100,000 jobs has a report of some 100 MB of JSON and a timeline of 500,000 events. Made as one object
and one string, each would double the steering process's peak memory at the very end of the run. Their long
list (``jobs``, ``traceEvents``) is encoded item by item instead; small files keep their indented form.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any


def write_json(path: Path, head: dict[str, Any], key: str, items: Iterable[Any], indent: int | None = None,
               default: Callable[[Any], Any] | None = None) -> None:
    """Write ``{**head, key: [*items]}`` to ``path`` as JSON. With ``indent`` (small files) it is made at once;
    without, each item is encoded when its turn comes, so that only one is held at a time."""
    if indent is not None:
        path.write_text(json.dumps({**head, key: list(items)}, indent=indent, default=default))
        return
    encode = json.JSONEncoder(default=default).encode  # one item at a time, with json's C encoder
    opening = encode(head)[:-1]  # the head's text without its closing brace
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"{opening}{', ' if head else ''}{json.dumps(key)}: [")
        separator = ""
        for item in items:
            f.write(separator)
            f.write(encode(item))
            separator = ", "
        f.write("]}")
