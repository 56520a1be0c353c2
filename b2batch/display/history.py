"""The runs of a log folder, from their JSON reports (``b2batch-run-*.report.json``): when each started, how
long it took, its tasks, failures, CPU-hours and efficiency when its report has accounting. What
``b2batch history`` lists."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from b2batch.display.html import batch_jobs_of, cpu_hours_of, usages_of

logger = logging.getLogger(__name__)

#: The name of a run's JSON report in its log folder.
PATTERN = "b2batch-run-*.report.json"


@dataclass
class PastRun:
    """One earlier run, as its report tells."""

    report: str
    script: str | None
    argv: list[str]
    started: str
    started_at: float
    seconds: float | None
    tasks: int
    done: int
    failed: int
    jobs: int
    result: str
    cpu_hours: float | None = None
    cpu_efficiency: float | None = None
    memory_efficiency: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def reports_in(folder: Path) -> list[Path]:
    """The JSON reports in ``folder`` (not below it)."""
    return sorted(folder.glob(PATTERN))


def past_runs(folder: Path, script: Path | None = None) -> tuple[list[PastRun], int]:
    """The runs whose reports are in ``folder`` (of ``script`` only, if given), oldest first, and how many
    reports were left out (unreadable, or of other scripts)."""
    runs, left_out = [], 0
    for path in reports_in(folder):
        try:
            report = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(report, dict) or "totals" not in report:
                raise ValueError("no totals")
        except (OSError, ValueError) as e:
            logger.warning("Skipped %s: not a readable b2batch run report (%s)", path, e)
            left_out += 1
            continue
        if script is not None and os.path.realpath(str(report.get("script"))) != os.path.realpath(script):
            left_out += 1
            continue
        runs.append(past_run(report, path))
    runs.sort(key=lambda r: r.started_at)
    return runs, left_out


def past_run(report: dict[str, Any], path: Path) -> PastRun:
    """What one report says of its run."""
    totals = report.get("totals") or {}
    outcomes = ("done", "failed", "not run", "missing", "unfinished", "already complete")
    if report.get("interrupted"):
        result = "stopped"
    elif report.get("failed"):
        result = "failed"
    else:
        result = "success"
    jobs = report.get("jobs") or []
    cpu, memory = run_efficiency(report)
    return PastRun(report=path.name, script=report.get("script"), argv=[str(a) for a in report.get("argv") or []],
                   started=str(report.get("started") or ""), started_at=float(report.get("started_at") or 0),
                   seconds=report.get("elapsed_seconds"), tasks=sum(int(totals.get(o) or 0) for o in outcomes),
                   done=int(totals.get("done") or 0),
                   failed=int(totals.get("failed") or 0) + int(totals.get("missing") or 0),
                   jobs=batch_jobs_of(report),
                   result=result, cpu_hours=cpu_hours_of(report, jobs), cpu_efficiency=cpu, memory_efficiency=memory)


def run_efficiency(report: dict[str, Any]) -> tuple[float | None, float | None]:
    """The run's CPU and memory efficiency (used / requested, 0..1) as the efficiency per family counts
    them, over all its jobs with figures: CPU time / (wall x CPUs requested), peak memory / memory requested;
    from the families' figures weighted by their jobs when the jobs have none."""
    usages = usages_of(report.get("jobs") or [])
    timed = [u for u in usages if _num(u.get("cpu")) is not None and _num(u.get("wall"))]
    capacity = sum(u["wall"] * (u.get("req_cpus") or 1) for u in timed)
    sized = [u for u in usages if _num(u.get("max_rss")) and _num(u.get("req_mem"))]
    if timed or sized:
        cpu = sum(u["cpu"] for u in timed) / capacity if capacity > 0 else None
        memory = sum(u["max_rss"] for u in sized) / sum(u["req_mem"] for u in sized) if sized else None
        return cpu, memory
    found = report.get("efficiency")
    if not isinstance(found, dict):
        return None, None
    result: list[float | None] = []
    for kind in ("cpu", "memory"):
        weighted, weight = 0.0, 0
        for figures in found.values():
            if not isinstance(figures, dict):
                continue
            value = _share(figures, kind)
            jobs = figures.get("jobs") if isinstance(figures.get("jobs"), int) else 1
            if value is not None:
                weighted, weight = weighted + value * jobs, weight + jobs
        result.append(weighted / weight if weight else None)
    return result[0], result[1]


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _share(figures: dict[str, Any], kind: str) -> float | None:
    return _num(figures.get(f"{kind}_efficiency"))
