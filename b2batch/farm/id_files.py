"""The files of a farm's work dir that list lines by id (``toprocess``, ``finished``, ``failed``: ``<id> <line>``),
and its timeline, a JSON list appended to in place: reading them, and the messages that name ids."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from b2batch.farm.definitions import FarmError

logger = logging.getLogger(__name__)


def ids_of(path: Path) -> list[int]:
    """The ids of a ``<id> <line>`` file (none if it does not exist)."""
    try:
        with open(path, "rb") as f:
            return [int(line.split(b" ", 1)[0]) for line in f if line.strip()]
    except FileNotFoundError:
        return []
    except ValueError as e:
        raise FarmError(f"{path} has a line that does not start with a task id ({e}); it is not a farm work-dir "
                        f"file. Fix or remove it.") from None


def lines_of(path: Path) -> Iterator[tuple[int, str]]:
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            for line in f:
                head, _, command = line.rstrip("\n").partition(" ")
                if head.strip():
                    yield int(head), command
    except FileNotFoundError:
        return


def count_lines(path: Path) -> int:
    try:
        with open(path, "rb") as f:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
    except FileNotFoundError:
        return 0


def tail_ids(fd: int, size: int, count: int, path: Path) -> tuple[list[int], int]:
    """The ids of the last ``count`` lines of the file (blank lines skipped), and where they begin."""
    chunk = 8192
    while True:
        start = max(0, size - chunk)
        data = os.pread(fd, size - start, start)
        ids: list[int] = []
        cut = len(data)
        end = len(data) - 1 if data.endswith(b"\n") else len(data)
        whole = True
        while len(ids) < count and end >= 0:
            newline = data.rfind(b"\n", 0, end)
            if newline < 0 and start > 0:
                whole = False  # this line may begin before the chunk
                break
            line = data[newline + 1:end]
            cut, end = newline + 1, newline
            if line.strip():
                try:
                    ids.append(int(line.split(b" ", 1)[0]))
                except ValueError:
                    raise FarmError(f"{path} has a line that does not start with a task id: {line[:200]!r}. Fix or "
                                    f"remove that line.") from None
        if len(ids) == count or whole:
            return ids, start + cut
        chunk *= 4


def ids_text(ids: Sequence[int], most: int = 10) -> str:
    text = ", ".join(str(i) for i in ids[:most])
    return text + (f" and {len(ids) - most} more" if len(ids) > most else "")


def replace_file(path: Path, data: bytes) -> None:
    """Write ``path`` at once: a temporary file next to it, renamed over it."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_bytes(data)
    os.replace(temporary, path)


def append_to_list(path: Path, events: Sequence[dict[str, Any]]) -> None:
    """Add ``events`` to the JSON list in the file ``path`` in place: only its end is read and rewritten (a file
    that holds no list is kept as ``<name>.unreadable`` and a new one begun)."""
    if not events:
        return
    body = ", ".join(json.dumps(e) for e in events).encode()
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        logger.warning("Cannot write %s: %s", path, e)
        return
    with os.fdopen(fd, "r+b") as f:
        size = f.seek(0, os.SEEK_END)
        tail_start = max(0, size - 64)
        f.seek(tail_start)
        tail = f.read()
        close = tail.rfind(b"]")
        if size == 0 or close < 0:
            if size:
                os.replace(path, path.with_name(f"{path.name}.unreadable"))
                replace_file(path, b"[" + body + b"]")
                return
            f.write(b"[" + body + b"]")
            return
        before = tail[:close].rstrip()
        empty = before.endswith(b"[") and (tail_start > 0 or before.strip() == b"[")
        f.seek(tail_start + close)
        f.truncate()
        f.write((b"" if empty else b", ") + body + b"]")
