"""Finding and reading the live-state files that steering processes write (:mod:`b2batch.engine.livestate`),
for ``b2batch monitor``: which run in a folder is the newest live one, whether its steering process still
lives, and the node a running job is on (from the first line its wrapper or worker printed into its stdout).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from b2batch.engine.livestate import HEARTBEAT, PATTERN
from b2batch.engine.processes import host_name

#: "b2batch: job of task X started on HOST at ..." (the wrapper) and "b2batch: X started in job N on HOST ..."
#: (a pilot's or bundle's worker).
_STARTED_ON = re.compile(r"^b2batch: .* started (?:in job \S+ )?on (\S+)", re.MULTILINE)


@dataclass
class LiveRun:
    """One run's live state as read from its file."""

    path: Path
    state: dict[str, Any] = field(default_factory=dict)

    @property
    def started_at(self) -> float:
        return float(self.state.get("started_at") or 0.0)

    @property
    def ended(self) -> bool:
        return bool(self.state.get("ended"))

    def gone(self, now: float | None = None) -> bool:
        """Whether the steering process ended without saying so (killed): on this host, its pid is not that
        process any more; elsewhere, no heartbeat for three heartbeats."""
        if self.ended:
            return False
        if self.state.get("host") == host_name():
            return not _alive(int(self.state.get("pid") or 0), self.started_at)
        return (now or time.time()) - float(self.state.get("updated_at") or 0.0) > 3 * HEARTBEAT

    @property
    def live(self) -> bool:
        return not self.ended and not self.gone()

    def reload(self) -> bool:
        """Read the file again if it changed; whether it did."""
        try:
            text = self.path.read_text()
        except OSError:
            return False
        try:
            state = json.loads(text)
        except ValueError:  # not written atomically by someone else: keep the last good one
            return False
        changed = state != self.state
        self.state = state
        return changed


def _alive(pid: int, started_at: float) -> bool:
    import psutil

    try:
        return pid > 0 and psutil.Process(pid).create_time() <= started_at + 5
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        return False


def candidates(folder: Path) -> list[Path]:
    """Live-state files in ``folder`` and in its sub-folders two levels down (a workflow's log_dir holds its
    runs' files, ``joblib/<call>/`` those of joblib calls)."""
    found: list[Path] = []
    for pattern in (PATTERN, f"*/{PATTERN}", f"*/*/{PATTERN}"):
        found += folder.glob(pattern)
    return found


def read_all(paths: list[Path]) -> list[LiveRun]:
    runs = []
    for path in paths:
        run = LiveRun(path)
        if run.reload():
            runs.append(run)
    return runs


def choose(runs: list[LiveRun]) -> LiveRun | None:
    """The newest live run that is not a nested joblib call (level > 0), else the newest of any."""
    top = [run for run in runs if not (run.state.get("joblib") or {}).get("level")] or runs
    live = [run for run in top if run.live]
    return max(live or top, key=lambda run: run.started_at, default=None)


def joblib_levels(runs: list[LiveRun], top: LiveRun) -> list[dict[str, Any]]:
    """The joblib calls that belong with ``top`` (itself, and nested calls that started after it while it ran),
    per level: calls, done, running, queued (submitted, queued and waiting), failed, total, and the throttle."""
    if "joblib" not in top.state:
        return []
    end = top.state.get("ended_at") or float("inf")
    levels: dict[int, dict[str, Any]] = {}
    for run in runs:
        meta = run.state.get("joblib")
        if not meta or not (run is top or top.started_at <= run.started_at <= end):
            continue
        level = int(meta.get("level") or 0)
        row = levels.setdefault(level, {"level": level, "calls": 0, "live": 0, "done": 0, "running": 0, "queued": 0,
                                        "failed": 0, "total": 0, "throttle": meta.get("throttle")})
        row["calls"] += 1
        row["live"] += run.live
        for systems in run.state.get("counts", {}).values():
            for counts in systems.values():
                row["done"] += counts.get("done", 0)
                row["running"] += counts.get("running", 0)
                row["failed"] += counts.get("failed", 0) + counts.get("cancelled", 0)
                row["queued"] += sum(counts.get(s, 0) for s in ("waiting", "submitted", "queued"))
        row["total"] = row["done"] + row["running"] + row["failed"] + row["queued"]
    return [levels[level] for level in sorted(levels)]


def node_of(stdout: str, cache: dict[str, str]) -> str:
    """The node a job runs on, from the first lines of its stdout (read once per log, then cached)."""
    if stdout in cache:
        return cache[stdout]
    try:
        with open(stdout, errors="replace") as f:
            head = f.read(4096)
    except OSError:
        return ""  # not there yet: look again next time
    found = _STARTED_ON.search(head)
    if found:
        cache[stdout] = found.group(1)
    return found.group(1) if found else ""


def tail(path: str, lines: int) -> list[str]:
    """The last ``lines`` lines of a log (read from its end, so big logs cost little)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - 64 * 1024))
            data = f.read().decode(errors="replace")
    except OSError as e:
        return [f"(cannot read {path}: {e.strerror})"]
    return data.splitlines()[-lines:] if data else ["(empty)"]
