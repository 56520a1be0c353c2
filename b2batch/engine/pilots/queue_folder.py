"""A work queue's folder (:mod:`b2batch.engine.pilots.work_queue` says what each file in it means): its paths,
what either side reads of it, and the files of batches and logs, each written or read with a few plain system
calls."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

Units = list[tuple[str, dict[str, Any]]]


class QueueFolder:
    """The paths of one queue folder and what both sides read of it."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self.todo = self.root / "todo"
        self.claimed = self.root / "claimed"
        self.done = self.root / "done"
        self.workers = self.root / "workers"
        self.cancelled = self.root / "cancel"
        self.stop_file = self.root / "stop"
        self.cancel_note = self.root / "cancelled"
        self.drained_file = self.root / "drained"
        self.steering = self.root / "steering"

    def create(self) -> None:
        for folder in (self.todo, self.claimed, self.done, self.workers, self.cancelled):
            folder.mkdir(parents=True, exist_ok=True)

    def waiting_batches(self) -> list[str]:
        return sorted(p[:-5] for p in os.listdir(self.todo) if p.endswith(".json") and not p.startswith("."))

    def claimed_batches(self) -> dict[str, list[str]]:
        """The claimed batches: worker -> batch names."""
        found: dict[str, list[str]] = {}
        try:
            workers = os.listdir(self.claimed)
        except FileNotFoundError:
            return found
        for worker in workers:
            try:
                found[worker] = sorted(e[:-5] for e in os.listdir(self.claimed / worker) if e.endswith(".json"))
            except (FileNotFoundError, NotADirectoryError):
                continue
        return found

    def is_cancelled(self, name: str) -> bool:
        return os.path.exists(f"{os.fspath(self.cancelled)}/{name}")

    def is_revoked(self, worker: str) -> bool:
        return (self.workers / f"{worker}.revoked").exists()

    def stopping(self, worker: str | None = None) -> bool:
        """Whether workers (or the one named) are to end when they find nothing to claim."""
        return self.stop_file.exists() or (worker is not None and (self.workers / f"{worker}.finish").exists())

    def is_drained(self) -> bool:
        return self.drained_file.exists()


def write_batch(folder: str, batch: str, units: Units) -> None:
    """Write ``folder/<batch>.json`` at once (a temporary file renamed over it)."""
    temporary = f"{folder}/.{batch}.{os.getpid()}.tmp"  # not a .json: no worker claims it
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        data = memoryview(json.dumps({"units": units}).encode())
        while data:
            data = data[os.write(descriptor, data):]
    finally:
        os.close(descriptor)
    os.rename(temporary, f"{folder}/{batch}.json")


def read_batch(path: str) -> Units:
    with open(path, "rb") as f:
        return [(name, unit) for name, unit in json.loads(f.read())["units"]]


def log_lines(path: Path, offset: int) -> tuple[list[dict[str, Any]], int]:
    """The complete lines of a log from ``offset`` on, and the offset after them (a line still being written is
    read next time)."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except OSError:
        return [], offset
    complete = data.rfind(b"\n") + 1
    if not complete:
        return [], offset
    lines = [line for line in data[:complete].splitlines() if line.strip()]
    try:  # every line one JSON object (as workers write them): one call into the decoder for all of them
        found = json.loads(b"[" + b",".join(lines) + b"]")
        if len(found) == len(lines) and all(type(value) is dict for value in found):
            return found, offset + complete
    except ValueError:
        pass
    found = []
    for line in lines:  # a line that is not JSON (cut short: its worker was killed while writing it) is left out
        try:
            found.append(json.loads(line))
        except ValueError:
            continue
    return found, offset + complete


def unlink_if_there(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
