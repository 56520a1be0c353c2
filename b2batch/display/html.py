"""The HTML report of a run: one self-contained file (inline CSS and SVG, a few lines of script, nothing
fetched at view time) made from the run's JSON report, beside it (``b2batch-run-*.report.html``).

It shows the run's headline numbers, the job timeline (pilot and bundle jobs with their tasks inside; one
lane per task family when there are many rows), the jobs queued and running over time, the queue-wait and
run-time distributions, the efficiency per family when the report has accounting, and the failures with
their reasons, log tails and log paths. Only the JSON report is read, so ``b2batch report`` makes the same
page for an earlier run.
"""

from __future__ import annotations

import functools
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from b2batch.display import charts
from b2batch.display.report_page import PAGE
from b2batch.display.trace import attempts, describe

#: Above this many timeline rows, own jobs are drawn as one lane per family and system.
MAX_ROWS = 200
#: Failures shown with their log tails; the others are counted by family and first line of their reason.
MAX_FAILURES = 100
#: Rows of work that did not run (not run, unfinished) listed by name.
MAX_OTHERS = 50


def html_path(report_path: Path) -> Path:
    """``b2batch-run-X.report.html`` beside ``b2batch-run-X.report.json``."""
    name = report_path.name
    stem = name[: -len(".report.json")] if name.endswith(".report.json") else report_path.stem
    return report_path.with_name(stem + ".report.html")


def write_html(report: dict[str, Any], report_path: Path) -> Path:
    """Write the HTML page of ``report`` (the JSON report read from ``report_path``) beside it."""
    target = html_path(report_path)
    target.write_text(render(report, report_path), encoding="utf-8")
    return target


def render(report: dict[str, Any], source: Path | None = None) -> str:
    """The HTML page of a JSON report."""
    return _page().render(**view(report, source))


@functools.cache
def _page() -> Any:
    """The page's template, compiled once per process. jinja keeps its compiled code in its bytecode cache (a
    folder of the user's own in the temporary directory, checked against the template's text), so that the end of
    the next run loads it instead of compiling the template again (~14 ms); without a usable folder it compiles."""
    import jinja2

    try:
        cache: Any = jinja2.FileSystemBytecodeCache()
    except (OSError, RuntimeError):  # no safe folder of the user's own: compiled each time
        cache = None
    environment = jinja2.Environment(loader=jinja2.DictLoader({"report.html": PAGE}), bytecode_cache=cache,
                                     autoescape=True, trim_blocks=True, lstrip_blocks=True)
    environment.filters["duration"] = charts.duration
    return environment.get_template("report.html")


def read_report(path: Path) -> dict[str, Any]:
    """A JSON report from its file; ValueError naming the file if it is none."""
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as e:
        raise ValueError(f"{path} is not a b2batch run report (not JSON: {e})") from None
    if not isinstance(found, dict) or "jobs" not in found or "totals" not in found:
        raise ValueError(f"{path} is not a b2batch run report (no 'jobs' and 'totals')")
    return found


# --- what the page shows -------------------------------------------------------------------------------------

def view(report: dict[str, Any], source: Path | None = None) -> dict[str, Any]:
    """Everything the page template needs, computed from the report."""
    jobs: list[dict[str, Any]] = report.get("jobs") or []
    t0 = float(report.get("started_at") or min((j.get("submitted_at") or 0 for j in jobs), default=0))
    t1 = max([float(report.get("ended_at") or t0)] + [float(j["ended_at"]) for j in jobs if j.get("ended_at")])
    waits = [j["started_at"] - j["submitted_at"] for j in jobs if j.get("started_at") and j.get("submitted_at")]
    runs = [j["ended_at"] - j["started_at"] for j in jobs if j.get("started_at") and j.get("ended_at")]
    rows, lanes = _timeline_rows(jobs, t1)
    totals = report.get("totals") or {}
    return {
        "report": report,
        "source": str(source) if source else "",
        "title": f"b2batch run {report.get('started', '')}",
        "status": _status(report),
        "headline": _headline(report, totals, jobs),
        "families": _families(report),
        "timeline": charts.timeline(rows, t0, t1) if rows and not lanes else None,
        "lanes": charts.occupancy(lanes, t0, t1) if lanes else None,
        "row_count": len(rows),
        "max_rows": MAX_ROWS,
        "over_time": charts.over_time(_intervals(jobs, t1), t0, t1) if jobs else None,
        "distributions": _distributions(jobs, report.get("worker_jobs") or [], waits, runs),
        "efficiency": _efficiency(report),
        "failures": _failures(report, jobs),
        "others": _others(report),
        "scheduler_calls": report.get("scheduler_calls") or {},
        "policies": _policies(report),
    }


def _distributions(jobs: list[dict[str, Any]], workers: list[dict[str, Any]], waits: list[float],
                   runs: list[float]) -> list[tuple[str, str, dict[str, Any]]]:
    """(title, what is counted, distribution) of queue waits and run times: per task, and, when the run had
    pilot or bundle jobs, per batch job (the tasks' own jobs and the worker jobs) apart from them."""
    found = [("Queue wait per task" if workers else "Queue wait", "tasks" if workers else "jobs", _distribution(waits)),
             ("Run time per task" if workers else "Run time", "tasks" if workers else "jobs", _distribution(runs))]
    if not workers:
        return found
    own = [j for j in jobs if not j.get("carrier")]
    batch_waits = [j["started_at"] - j["submitted_at"] for j in [*own, *workers]
                   if j.get("started_at") and j.get("submitted_at")]
    batch_runs = [j["ended_at"] - j["started_at"] for j in [*own, *workers] if j.get("started_at") and j.get("ended_at")]
    return found + [("Queue wait per batch job", "batch jobs", _distribution(batch_waits)),
                    ("Run time per batch job", "batch jobs", _distribution(batch_runs))]


def _status(report: dict[str, Any]) -> tuple[str, str]:
    """(CSS class, words) of the run's result."""
    if report.get("interrupted"):
        return "failed", "stopped before its end"
    if report.get("failed"):
        return "failed", f"failed (exit status {report.get('exit_status')})"
    return "done", "success (exit status 0)"


def _headline(report: dict[str, Any], totals: dict[str, Any], jobs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    figures = [("tasks done", str(totals.get("done", 0))), ("tasks failed", str(totals.get("failed", 0)))]
    for key in ("not run", "missing", "unfinished", "already complete"):
        if totals.get(key):
            figures.append((f"tasks {key}", str(totals[key])))
    figures.append(("batch jobs", str(batch_jobs_of(report))))
    for kind, counts in sorted((totals.get("worker_jobs") or {}).items()):
        never = f", {counts.get('never_started', 0)} never started" if counts.get("never_started") else ""
        figures.append((f"{kind} jobs", f"{counts.get('started', 0)} started{never}"))
    if totals.get("resubmissions"):
        figures.append(("resubmissions", str(totals["resubmissions"])))
    figures.append(("wall time", charts.duration(report.get("elapsed_seconds"))))
    cpu = cpu_hours_of(report, jobs)
    if cpu is not None:
        figures.append(("CPU-hours", charts.hours(cpu)))
    return figures


def batch_jobs_of(report: dict[str, Any]) -> int:
    """The batch jobs a run had: own jobs and pilot and bundle jobs (``totals.batch_jobs``), or, in a report of
    a b2batch before it counted them, the distinct job ids of its tasks."""
    totals = report.get("totals") or {}
    if isinstance(totals.get("batch_jobs"), int):
        return int(totals["batch_jobs"])
    return len({(j.get("system"), i) for j in report.get("jobs") or [] for i in j.get("job_ids") or []})


def cpu_hours_of(report: dict[str, Any], jobs: list[dict[str, Any]]) -> float | None:
    """The CPU time the run's jobs used, in hours, when the report has their figures (else None)."""
    seconds = [usage["cpu"] for usage in usages_of(jobs) if isinstance(usage.get("cpu"), (int, float))]
    return sum(seconds) / 3600 if seconds else None


def usages_of(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The jobs' resource figures (their ``usage``: the wrapper's own, with the scheduler's accounting)."""
    return [j["usage"] for j in jobs if isinstance(j.get("usage"), dict)]


def _families(report: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The counts per family and batch system, as the end summary has them: (columns, rows)."""
    by_family: dict[str, dict[str, dict[str, int]]] = report.get("by_family") or {}
    outcomes = ["done", "failed", "not run", "missing", "unfinished", "already complete"]
    used = [o for o in outcomes if any(c.get(o) for s in by_family.values() for c in s.values())]
    rows = [[family, system, *(str(counts.get(o, 0)) for o in used)]
            for family, systems in sorted(by_family.items()) for system, counts in sorted(systems.items())]
    return ["task family", "where", *used], rows


def _history(job: dict[str, Any]) -> list[tuple[float, str, str | None]]:
    # the report's file holds objects; a run's own page gets (at, state, job_id) tuples (display/changes.JobView)
    return [(float(h["at"]), str(h["state"]), h.get("job_id")) if isinstance(h, dict) else h
            for h in job.get("history") or []]


def _timeline_rows(jobs: list[dict[str, Any]], t1: float) -> tuple[list[charts.Row], dict[str, list[Any]]]:
    """The rows of the timeline: one per pilot or bundle job with its tasks inside, one per other job with its
    queued and running times per attempt. Beyond MAX_ROWS rows, own jobs become lanes per family instead."""
    own = [job for job in jobs if not job.get("carrier")]
    inside = [job for job in jobs if job.get("carrier") and job.get("started_at") is not None]
    count = len({str(job["carrier"]).split(" (")[0] for job in inside})
    many = count + len(own) > MAX_ROWS  # then no tooltip per task: lanes say how many ran when
    carriers: dict[str, charts.Row] = {}
    for job in inside if not many or count <= MAX_ROWS // 2 else []:
        name = str(job["carrier"]).split(" (")[0]
        row = carriers.setdefault(name, charts.Row(label=name, title=str(job["carrier"])))
        state = job.get("state") if job.get("state") in ("done", "failed") else "unfinished"
        end = job.get("ended_at") or t1
        title = "" if many else (f"{describe(job['family'], job['params'])}: {state}, "
                                 f"{charts.duration(end - job['started_at'])}")
        row.segments.append(charts.Segment(job["started_at"], end, state, title))
    rows = sorted(carriers.values(), key=lambda r: min(s.start for s in r.segments))
    if many:
        lanes: dict[str, list[Any]] = {}
        if rows:  # a lane per pilot or bundle job
            for row in rows:
                lanes[row.label] = [(s.start, s.end, s.state) for s in row.segments]
        else:  # too many of them too (or none): a lane per family of the tasks they ran
            for job in inside:
                state = job.get("state") if job.get("state") in ("done", "failed") else "unfinished"
                lanes.setdefault(f"{job['family']} on {job['system']}", []).append(
                    (job["started_at"], job.get("ended_at") or t1, state))
        for job in own:
            lane = lanes.setdefault(f"{job['family']} on {job['system']}", [])
            for attempt in attempts(_history(job), t1):
                if attempt.started is not None:
                    lane.append((attempt.started, attempt.ended or t1, attempt.state))
        return rows, {name: lane for name, lane in lanes.items() if lane}
    for job in own:
        name = describe(job["family"], job.get("params") or {})
        row = charts.Row(label=name, title=f"{name} on {job.get('system')}: jobs {', '.join(job.get('job_ids') or [])}")
        for attempt in attempts(_history(job), t1):
            if attempt.submitted is None:
                continue
            end = attempt.ended or t1
            queued_end = attempt.started if attempt.started is not None else end
            row.segments.append(charts.Segment(attempt.submitted, queued_end, "queued",
                                               f"job {attempt.job_id} queued {charts.duration(queued_end - attempt.submitted)}"))
            if attempt.started is not None:
                row.segments.append(charts.Segment(attempt.started, end, attempt.state.replace(" ", "-"),
                                                   f"job {attempt.job_id} ran {charts.duration(end - attempt.started)}: "
                                                   f"{attempt.state}"))
        rows.append(row)
    return rows, {}


def _intervals(jobs: list[dict[str, Any]], t1: float) -> list[tuple[float, float | None, float]]:
    """(submitted, started or None, ended) of each job that was submitted; one not ended ends with the run."""
    return [(j["submitted_at"], j.get("started_at"), j.get("ended_at") or t1) for j in jobs if j.get("submitted_at")]


def _distribution(values: list[float]) -> dict[str, Any]:
    return {"chart": charts.histogram(values), "count": len(values),
            "median": charts.quantile(values, 0.5), "p90": charts.quantile(values, 0.9),
            "max": max(values) if values else None}


#: The columns of the efficiency table: the report's key per family (display/efficiency.py) and its heading.
EFFICIENCY_COLUMNS = (("system", "where"), ("jobs", "jobs"), ("cpu_efficiency", "CPU eff."),
                      ("memory_efficiency", "memory eff."), ("cpu_hours", "CPU-hours"),
                      ("peak_memory_mb", "peak memory"), ("p95_memory_mb", "95% of peaks under"),
                      ("requested_memory_mb", "requested"), ("killed_for_memory", "killed for memory"),
                      ("killed_for_time", "killed for time"), ("failed_nodes", "failed on"),
                      ("suggested_request", "suggested request"))
#: Keys of a family's efficiency that are not columns of their own.
EFFICIENCY_HIDDEN = ("sources", "suggested_setting", "suggested_memory_mb")
#: An efficiency under this share is marked.
LOW = 0.5


def _efficiency(report: dict[str, Any]) -> tuple[list[str], list[list[tuple[str, str]]]] | None:
    """The efficiency per family from the report's ``efficiency`` key: (headings, rows of (text, CSS class));
    only the columns some family has; None when the report has no figures."""
    found = report.get("efficiency")
    if not isinstance(found, dict) or not found:
        return None
    families = {str(k): v for k, v in found.items() if isinstance(v, dict)}
    known = dict(EFFICIENCY_COLUMNS)
    keys = [k for k, _ in EFFICIENCY_COLUMNS if any(f.get(k) not in (None, {}, "") for f in families.values())]
    keys += sorted({k for f in families.values() for k in f} - set(known) - set(EFFICIENCY_HIDDEN))
    rows = []
    for family, figures in families.items():
        row = [(family, "")]
        for key in keys:
            value = figures.get(key)
            text = _cell(key, value)
            if key == "suggested_request" and figures.get("suggested_setting"):
                text += f" ({figures['suggested_setting']})"
            low = key.endswith("_efficiency") and isinstance(value, (int, float)) and value < LOW
            row.append((text, "low" if low else ""))
        rows.append(row)
    return ["task family", *(known.get(k, k.replace("_", " ")) for k in keys)], rows


def _cell(key: str, value: Any) -> str:
    if value is None or value == {}:
        return "-"
    if key.endswith("_efficiency") and isinstance(value, (int, float)):
        return f"{value:.0%}"
    if key.endswith("_mb") and isinstance(value, (int, float)):
        return f"{value / 1024:.1f} GB" if value >= 1024 else f"{value:.0f} MB"
    if key == "cpu_hours" and isinstance(value, (int, float)):
        return f"{value:.2f}"
    if isinstance(value, float):
        return f"{value:.3g}"
    if isinstance(value, dict):
        items = list(value.items())
        return ", ".join(f"{k} ({v})" for k, v in items[:10]) + (f" and {len(items) - 10} more" if len(items) > 10 else "")
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value[:10]) + (f" and {len(value) - 10} more" if len(value) > 10 else "")
    return str(value)


def _failures(report: dict[str, Any], jobs: list[dict[str, Any]]) -> dict[str, Any]:
    """The failed tasks: the first MAX_FAILURES in full, the rest counted by family and reason."""
    failed = [j for j in jobs if j.get("state") == "failed"]
    failed.sort(key=lambda j: j.get("ended_at") or 0)
    shown = []
    for job in failed[:MAX_FAILURES]:
        reason = str(job.get("reason") or "").split("\nstdout: ")[0]
        job_ids = job.get("job_ids") or []
        shown.append({"name": describe(job["family"], job.get("params") or {}), "system": job.get("system"),
                      "job": f"job {job_ids[-1]}" if job_ids else "not submitted", "carrier": job.get("carrier") or "",
                      "reason": reason.splitlines()[0] if reason else "", "more": "\n".join(reason.splitlines()[1:]),
                      "stdout": job.get("stdout") or "", "stderr": job.get("stderr") or "",
                      "tail": job.get("stderr_tail") or "", "node": _node(job)})
    rest = Counter((j["family"], _kind_of(str(j.get("reason") or ""))) for j in failed[MAX_FAILURES:])
    others = [o for o in report.get("other_tasks") or [] if o.get("outcome") in ("failed", "missing")]
    return {"count": len(failed) + len(others), "shown": shown,
            "rest": [(family, reason, n) for (family, reason), n in rest.most_common(MAX_OTHERS)],
            "rest_count": sum(rest.values()),
            "other": others[:MAX_OTHERS]}


def _kind_of(reason: str) -> str:
    """The first line of a failure's reason without what names the one task and job, so that failures of one
    kind count together: ``Task A (x=1) failed: job 12.3 on slurm exited with code 1.`` ->
    ``job on slurm exited with code 1.``"""
    first = reason.split("\n", 1)[0]
    first = first.split(" failed: ", 1)[1] if first.startswith("Task ") and " failed: " in first else first
    return re.sub(r"\bjob \S+ on\b", "job on", first)


def _node(job: dict[str, Any]) -> str:
    usage = job.get("usage")
    return str(usage.get("host") or "") if isinstance(usage, dict) else ""


def _others(report: dict[str, Any]) -> dict[str, Any]:
    """Work that did not run or did not end (not run, unfinished), by name; already complete ones are counted."""
    jobs = [j for j in report.get("jobs") or [] if j.get("state") not in ("done", "failed")]
    names = [(describe(j["family"], j.get("params") or {}), f"still {j.get('state')} when the run ended")
             for j in jobs]
    names += [(o.get("task", o.get("task_id", "")), o.get("reason") or o.get("outcome", ""))
              for o in report.get("other_tasks") or [] if o.get("outcome") in ("not run", "unfinished")]
    return {"count": len(names), "shown": names[:MAX_OTHERS]}


def _policies(report: dict[str, Any]) -> list[tuple[str, list[str], int]]:
    """What the self-healing policies did (the report's ``policies``): (policy, the first lines, how many)."""
    found = report.get("policies")
    if not isinstance(found, dict):
        return []
    return [(str(policy), [str(e.get("text") or e) if isinstance(e, dict) else str(e) for e in entries[:MAX_OTHERS]],
             len(entries)) for policy, entries in found.items() if isinstance(entries, list) and entries]
