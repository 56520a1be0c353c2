"""Writing a run's JSON files (timeline, report) without holding them in memory twice.

A run of 100,000 jobs has a report of some 100 MB of JSON and a timeline of 500,000 events. Made as one object
and one string, each would double the steering process's peak memory at the very end of the run. Their long
list (``jobs``, ``traceEvents``) is encoded item by item instead; small files keep their indented form.

A large file's head is its first line, so that :func:`rewrite_head` changes it (e.g. accounting figures that
came after the run) without reading the long list.
"""

from __future__ import annotations

import json
import os
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
        f.write(f"{opening}{', ' if head else ''}{_marker(key)}")  # the head alone on the first line
        separator = ""
        for item in items:
            f.write(separator)
            f.write(encode(item))
            separator = ", "
        f.write("]}")


def read_head(path: Path, key: str) -> dict[str, Any]:
    """The head of the file that :func:`write_json` wrote to ``path`` (the object without ``key``); a large
    file's long list is not read."""
    with open(path, encoding="utf-8") as f:
        head = _streamed_head(f.readline(), key)
        if head is not None:
            return head
        f.seek(0)
        whole = json.load(f)
    whole.pop(key, None)
    return whole


def rewrite_head(path: Path, key: str, edit: Callable[[dict[str, Any]], None]) -> None:
    """Let ``edit`` change the head of the file that :func:`write_json` wrote to ``path`` (the object without
    ``key``), and replace the file at once (a reader sees the old file or the new one). A large file's long list
    is copied as it is, never decoded."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(path, encoding="utf-8") as f:
            head = _streamed_head(f.readline(), key)
            if head is not None:  # written item by item: the head, then the long list from line two
                edit(head)
                with open(temporary, "w", encoding="utf-8") as out:
                    out.write(f"{json.dumps(head)[:-1]}{', ' if head else ''}{_marker(key)}")
                    while block := f.read(1 << 20):
                        out.write(block)
            else:  # a small file, indented: read whole
                f.seek(0)
                whole = json.load(f)
                items = whole.pop(key, [])
                edit(whole)
                temporary.write_text(json.dumps({**whole, key: items}, indent=1), encoding="utf-8")
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def _marker(key: str) -> str:
    return f"{json.dumps(key)}: [\n"


def _streamed_head(first: str, key: str) -> dict[str, Any] | None:
    """The head on the first line of a file written item by item; None if the file is not one."""
    if not first.endswith(_marker(key)):
        return None
    opening = first[:-len(_marker(key))].rstrip().rstrip(",")
    return json.loads(opening + "}") if opening != "{" else {}
