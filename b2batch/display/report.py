"""What a run did, told when it ends: a summary on stderr, a timeline of every job (Chrome's Trace Event
Format, for Perfetto or chrome://tracing) and a JSON report, and whether anything failed.

:class:`RunReport` is what a front-end wraps around a run. The jobs come from the run's record (with the time
of each change of state, recorded here as it happens); work that did not run as jobs (a local run, wrapper
tasks, tasks left pending) comes from the front-end's own account, :class:`FrontEndAccount`.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TextIO

from b2batch.engine import JobRecord, RunRecord

logger = logging.getLogger(__name__)

#: The columns of the summary: what became of each task in this run.
OUTCOMES = ("done", "failed", "not run", "missing", "unfinished", "already complete")
#: Where tasks that are no job ran (a local run, wrapper tasks, run_local tasks).
HERE = "here"


def describe(family: str, params: dict[str, str]) -> str:
    """``Family(a=1, b=2)``."""
    return f"{family}({', '.join(f'{k}={v}' for k, v in params.items())})"


@dataclass
class TaskOutcome:
    """What became of one task in the run."""

    task_id: str
    name: str
    family: str
    system: str
    outcome: str  # one of OUTCOMES
    reason: str = ""
    record: JobRecord | None = None


@dataclass
class FrontEndAccount:
    """What a front-end says of its run beyond the jobs of the record."""

    #: Work left pending (never run) by key, with the reason if known.
    pending: dict[str, str] = field(default_factory=dict)
    #: What became of work that had no job (done or failed here, missing inputs, already complete ...).
    tasks: list[TaskOutcome] = field(default_factory=list)
    #: Whether the front-end judges the run failed (e.g. luigi could not schedule everything).
    failed: bool = False
    #: The front-end's own name for the run's status (e.g. luigi's LuigiStatusCode).
    status: str | None = None


@dataclass
class RunReport:
    """Wraps a run: live progress (batch runs), then the summary, the timeline and the report."""

    run: RunRecord
    batch: bool = False
    mode: str = "local"
    script: str | None = None
    argv: list[str] = field(default_factory=list)
    stream: TextIO | None = None
    result: Any = None  # the front-end's own result (luigi's LuigiRunResult), returned by process()
    outcomes_of_tasks: FrontEndAccount | None = None
    started_at: float = 0.0
    ended_at: float = 0.0
    interrupted: bool = False
    error: str = ""  # the exception that stopped the run, if one did
    failed: bool = False
    exits_on_failure: bool = True  # process()'s exit_on_failure: a failed run ends the script with status 1
    paths: dict[str, Path] = field(default_factory=dict)
    history: dict[str, list[tuple[float, str, str | None]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._progress: Any = None

    # --- the run -------------------------------------------------------------------------------------

    def __enter__(self) -> Self:
        self.started_at = self.run.started_at
        self.run.listeners.append(self._record)
        if self.batch:
            from b2batch.display.progress import Progress

            self._progress = Progress(self.run)
            self._progress.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.ended_at = time.time()
        if self._progress is not None:
            self._progress.stop()
        if self._record in self.run.listeners:
            self.run.listeners.remove(self._record)
        self.interrupted = exc_type is not None
        self.error = "" if exc_type is None else exc_type.__name__
        account = self.outcomes_of_tasks or FrontEndAccount()
        self.failed = self.interrupted or account.failed
        try:
            outcomes = self.outcomes()
            self.failed = self.failed or any(o.outcome in ("failed", "missing") for o in outcomes)
            if self.batch:
                self.write_files(outcomes)
            stream = self.stream or sys.stderr
            stream.write(self.summary(outcomes))
            stream.flush()
        except Exception:  # the account of a run must not change its result
            logger.exception("Could not summarise the run")

    def _record(self, record: JobRecord) -> None:
        """The listener on the record: when each job changed to which state (the timeline is made of these)."""
        job_id = record.job_ids[-1] if record.job_ids else None
        self.history.setdefault(record.task_id, []).append((time.time(), record.state, job_id))

    @property
    def exit_status(self) -> int | None:
        """What process() makes the script's exit status (None: interrupted, the exception decides)."""
        return None if self.interrupted else int(self.failed and self.exits_on_failure)

    # --- what happened -------------------------------------------------------------------------------

    def outcomes(self) -> list[TaskOutcome]:
        """Every task of the run with what became of it: the jobs of the record first, then the others."""
        account = self.outcomes_of_tasks or FrontEndAccount()
        found: dict[str, TaskOutcome] = {}
        for record in list(self.run.jobs.values()):
            if record.state in ("done", "failed"):
                outcome, reason = record.state, record.reason
            elif record.state == "cancelled":
                outcome, reason = "unfinished", record.reason
            elif record.task_id in account.pending:
                outcome, reason = "not run", account.pending[record.task_id]
            else:
                outcome, reason = "unfinished", f"still {record.state} when the run ended"
            found[record.task_id] = TaskOutcome(record.task_id, describe(record.family, record.params), record.family,
                                                record.system, outcome, reason, record)
        for other in account.tasks:
            found.setdefault(other.task_id, other)
        return list(found.values())

    # --- the summary ---------------------------------------------------------------------------------

    def summary(self, outcomes: list[TaskOutcome]) -> str:
        """The end summary: counts per family and system, the failures with their logs, the
        resubmissions, the time taken, the files written, the exit status."""
        lines = ["", "===== b2batch summary =====", ""]
        rows: dict[tuple[str, str], Counter[str]] = {}
        for o in outcomes:
            rows.setdefault((o.family, o.system), Counter())[o.outcome] += 1
        mode = {"batch": "as batch jobs", "test": "in test mode", "local": "in this process"}[self.mode]
        ran = sum(1 for o in outcomes if o.outcome != "already complete")
        lines.append(f"{ran} task(s) {mode} in {_seconds(self.ended_at - self.started_at)}"
                     + (f" (stopped by {self.error})" if self.interrupted else "") + ":")
        columns = [c for c in OUTCOMES if any(row[c] for row in rows.values())]
        table = [["task family", "where", *columns]]
        for (family, system), row in sorted(rows.items()):
            table.append([family, system, *(str(row[c]) for c in columns)])
        lines += ["  " + line for line in _align(table)] if rows else ["  no tasks"]

        failed = [o for o in outcomes if o.outcome in ("failed", "missing")]
        if failed:
            lines += ["", f"Failed ({len(failed)}):"]
            for o in failed:
                lines += _failure(o)
        resubmitted = [o for o in outcomes if o.record is not None and o.record.resubmissions]
        if resubmitted:
            lines += ["", f"Resubmitted ({len(resubmitted)}):"]
            for o in resubmitted:
                assert o.record is not None
                lines.append(f"  {o.name} on {o.system}: jobs {', '.join(o.record.job_ids)}")
                lines += [f"    {i}. {reason.splitlines()[0] if reason else '(no reason given)'}"
                          for i, reason in enumerate(o.record.resubmissions, 1)]
        not_run = [o for o in outcomes if o.outcome in ("not run", "unfinished")]
        if not_run:
            lines += ["", f"Not run or unfinished ({len(not_run)}):"]
            lines += [f"  {o.name}: {o.reason}" if o.reason else f"  {o.name}" for o in not_run[:20]]
            if len(not_run) > 20:
                lines.append(f"  ... and {len(not_run) - 20} more")
        calls = self.run.scheduler_calls
        if calls:
            lines += ["", "Scheduler commands: " + ", ".join(f"{calls[p]} {p}" for p in sorted(calls)) + "."]
        if self.paths:
            lines.append("")
            lines.append(f"Timeline: {self.paths['trace']} (open in https://ui.perfetto.dev or chrome://tracing)")
            lines.append(f"Report:   {self.paths['report']}")
        lines.append("")
        if self.interrupted:
            lines.append(f"Result: stopped by {self.error}.")
        elif self.failed:
            what = f"{len(failed)} task(s) failed" if failed else "luigi could not schedule or run everything"
            ends = "exit status 1" if self.exits_on_failure else "process() returns (exit_on_failure is false)"
            lines.append(f"Result: {what}; {ends}.")
        else:
            lines.append("Result: success; exit status 0.")
        lines += ["===== b2batch summary =====", ""]
        return "\n".join(lines) + "\n"

    # --- the files -----------------------------------------------------------------------------------

    def write_files(self, outcomes: list[TaskOutcome]) -> None:
        """Write the timeline and the report into log_dir; their paths go into :attr:`paths`."""
        from b2batch import paths
        from b2batch.settings import get_setting

        try:
            folder = paths.resolve(get_setting("log_dir"))
            folder.mkdir(parents=True, exist_ok=True)
            stem = "b2batch-run-" + time.strftime("%Y%m%d-%H%M%S", time.localtime(self.started_at))
            for n in range(1, 1000):
                if not (folder / f"{stem}.trace.json").exists() and not (folder / f"{stem}.report.json").exists():
                    break
                stem = stem.split("_")[0] + f"_{n}"
            self.paths = {"trace": folder / f"{stem}.trace.json", "report": folder / f"{stem}.report.json"}
            records = list(self.run.jobs.values())
            indent = 1 if len(records) <= 1000 else None  # large files: json's fast encoder, no indent
            self.paths["trace"].write_text(json.dumps(trace(records, self.history, self.started_at,
                                                            self.ended_at), indent=indent))
            self.paths["report"].write_text(json.dumps(self.report(outcomes), indent=indent, default=str))
        except OSError as e:
            logger.warning("Could not write the run's timeline and report: %s", e)
            self.paths = {}

    def report(self, outcomes: list[TaskOutcome]) -> dict[str, Any]:
        """The machine-readable report: the run, its totals, every job with its history, the other tasks."""
        from b2batch import __version__

        totals: Counter[str] = Counter(o.outcome for o in outcomes)
        by_family: dict[str, dict[str, dict[str, int]]] = {}
        for o in outcomes:
            by_family.setdefault(o.family, {}).setdefault(o.system, Counter())[o.outcome] += 1  # type: ignore[arg-type]
        jobs = []
        for record in self.run.jobs.values():
            job = record.as_dict()
            job["history"] = [{"at": t, "state": s, "job_id": j} for t, s, j in self.history.get(record.task_id, [])]
            jobs.append(job)
        return {
            "b2batch_version": __version__,
            "script": self.script,
            "argv": self.argv,
            "mode": self.mode,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "started": _iso(self.started_at),
            "ended": _iso(self.ended_at),
            "elapsed_seconds": round(self.ended_at - self.started_at, 3),
            "interrupted": self.interrupted,
            "failed": self.failed,
            "exit_status": self.exit_status,
            "luigi_status": (self.outcomes_of_tasks or FrontEndAccount()).status,
            "totals": {**{o: totals[o] for o in OUTCOMES}, "jobs": sum(len(r.job_ids) for r in self.run.jobs.values()),
                       "resubmissions": sum(len(r.resubmissions) for r in self.run.jobs.values())},
            "by_family": {f: {s: dict(c) for s, c in systems.items()} for f, systems in by_family.items()},
            "scheduler_calls": dict(sorted(self.run.scheduler_calls.items())),
            "jobs": jobs,
            "other_tasks": [{"task_id": o.task_id, "task": o.name, "outcome": o.outcome, "reason": o.reason}
                            for o in outcomes if o.record is None],
            "trace": str(self.paths.get("trace", "")),
        }


# --- the timeline ---------------------------------------------------------------------------------------

@dataclass
class Attempt:
    """One job of a task: from its submission to its end."""

    job_id: str | None
    submitted: float | None
    started: float | None = None
    ended: float | None = None
    state: str = "unfinished"


def attempts(history: list[tuple[float, str, str | None]], end: float) -> list[Attempt]:
    """The jobs of one task from its changes of state: a job starts with ``submitted`` (or the first
    ``queued``/``running``), runs from ``running``, ends with ``done``, ``failed``, ``resubmitted`` or
    ``waiting`` (new dynamic requirements). A job not over at ``end`` is ``unfinished``."""
    found: list[Attempt] = []
    current: Attempt | None = None
    for at, state, job_id in history:
        if state in ("submitted", "queued", "running"):
            if current is None:
                current = Attempt(job_id=job_id, submitted=at)
            if state == "running" and current.started is None:
                current.started = at
        elif state in ("done", "failed", "resubmitted", "waiting", "cancelled"):
            if current is not None:
                current.ended, current.state = at, {"waiting": "new requirements"}.get(state, state)
                found.append(current)
                current = None
            elif state == "failed":  # it never became a job: the submission failed
                found.append(Attempt(job_id=None, submitted=None, ended=at, state="not submitted"))
    if current is not None:
        current.ended = end
        found.append(current)
    return found


def _history_of(record: JobRecord) -> list[tuple[float, str, str | None]]:
    """A history from the record's times alone, for a record whose changes were not seen."""
    job_id = record.job_ids[-1] if record.job_ids else None
    history = []
    if record.submitted_at is not None:
        history.append((record.submitted_at, "submitted", job_id))
    if record.started_at is not None:
        history.append((record.started_at, "running", job_id))
    if record.ended_at is not None and record.state in ("done", "failed"):
        history.append((record.ended_at, record.state, job_id))
    return history


COLOURS = {"done": "good", "failed": "terrible", "resubmitted": "bad", "unfinished": "grey",
           "new requirements": "yellow", "not submitted": "terrible"}


def trace(records: list[JobRecord], history: dict[str, list[tuple[float, str, str | None]]], started_at: float,
          ended_at: float) -> dict[str, Any]:
    """The timeline in Chrome's Trace Event Format: a process per batch system, a thread (row) per task;
    per job a ``job`` span holding a ``queued`` span and, if it started, a ``running`` span. Times are
    microseconds since the start of the run."""
    def us(t: float) -> int:
        return round((t - started_at) * 1e6)

    events: list[dict[str, Any]] = []
    systems = sorted({r.system for r in records})
    pids = {system: i + 1 for i, system in enumerate(systems)}
    for system, pid in pids.items():
        events.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": system}})
    rows = [(r, attempts(history.get(r.task_id) or _history_of(r), ended_at)) for r in records]
    rows.sort(key=lambda row: min([a.submitted or a.ended or ended_at for a in row[1]], default=ended_at))
    pooled = [row for row in rows if row[0].carrier]
    rows = [row for row in rows if not row[0].carrier]
    for tid, (record, jobs) in enumerate(rows, 1):
        pid = pids[record.system]
        name = describe(record.family, record.params)
        events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}})
        events.append({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid, "args": {"sort_index": tid}})
        resubmissions = iter(record.resubmissions)
        for job in jobs:
            end = job.ended if job.ended is not None else ended_at
            reason = next(resubmissions, "") if job.state == "resubmitted" else (
                record.reason if job.state in ("failed", "not submitted") else "")
            args = {"task_id": record.task_id, "family": record.family, "params": record.params,
                    "system": record.system, "job_id": job.job_id, "state": job.state,
                    "reason": reason.splitlines()[0] if reason else "", "stdout": record.stdout,
                    "stderr": record.stderr}
            if job.submitted is None:  # no job: an instant at the failed submission
                events.append({"name": f"{name}: submission failed", "cat": "submission", "ph": "i", "s": "t",
                               "ts": us(end), "pid": pid, "tid": tid, "args": args})
                continue
            begin, start, finish = us(job.submitted), us(job.started) if job.started else None, us(end)
            events.append({"name": name, "cat": "job", "ph": "X", "ts": begin, "dur": finish - begin, "pid": pid,
                           "tid": tid, "cname": COLOURS.get(job.state, "generic_work"), "args": args})
            queued_end = start if start is not None else finish
            events.append({"name": "queued", "cat": "queued", "ph": "X", "ts": begin, "dur": queued_end - begin,
                           "pid": pid, "tid": tid, "args": {"job_id": job.job_id}})
            if start is not None:
                events.append({"name": "running", "cat": "running", "ph": "X", "ts": start, "dur": finish - start,
                               "pid": pid, "tid": tid, "args": {"job_id": job.job_id, "state": job.state}})
    events += _worker_tracks(pooled, pids, len(rows) + 1, us, ended_at)
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"started": _iso(started_at), "ended": _iso(ended_at), "tool": "b2batch"}}


def _worker_tracks(rows: list[tuple[JobRecord, list[Attempt]]], pids: dict[str, int], first_tid: int, us: Any,
                   ended_at: float) -> list[dict[str, Any]]:
    """Units that ran in worker jobs (pilots, bundles): one track per worker job, each unit a slice of it from
    its start to its end as the worker saw them."""
    events: list[dict[str, Any]] = []
    tids: dict[tuple[str, str], int] = {}
    for record, _jobs in rows:
        if record.started_at is None or not record.job_ids:
            continue
        pid, job_id = pids[record.system], record.job_ids[-1]
        tid = tids.get((record.system, job_id))
        if tid is None:
            tid = tids[(record.system, job_id)] = first_tid + len(tids)
            events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                           "args": {"name": record.carrier.split(" (")[0]}})
            events.append({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid,
                           "args": {"sort_index": tid}})
        begin = us(record.started_at)
        finish = us(record.ended_at if record.ended_at is not None else ended_at)
        state = record.state if record.state in ("done", "failed") else "unfinished"
        events.append({"name": describe(record.family, record.params), "cat": "task", "ph": "X", "ts": begin,
                       "dur": max(0, finish - begin), "pid": pid, "tid": tid, "cname": COLOURS.get(state, "generic_work"),
                       "args": {"task_id": record.task_id, "job_id": job_id, "state": state, "carrier": record.carrier,
                                "reason": record.reason.splitlines()[0] if record.reason else "",
                                "stdout": record.stdout, "stderr": record.stderr}})
    return events


# --- helpers ----------------------------------------------------------------------------------------------

def _failure(o: TaskOutcome) -> list[str]:
    """The lines of one failed task: what failed where, why, its logs and the end of its stderr."""
    record = o.record
    if record is None:
        return [f"  {o.name}: {o.reason or 'failed in this process (its error is in the log above)'}"]
    job = f"job {record.job_ids[-1]} on {record.system}" if record.job_ids else f"not submitted to {record.system}"
    if record.carrier:
        job = f"in {record.carrier}"
    lines = [f"  {o.name}: {job}"]
    if not record.job_ids:  # the batch system's answer is the reason: all of it (its stderr says what is wrong)
        lines += [f"    {line}" for line in record.reason.splitlines() if line.strip()][:12]
        return lines  # no job: no logs
    reason = [line for line in record.reason.split("\nstdout: ")[0].splitlines() if line.strip()]
    if reason:
        lines.append(f"    {reason[0]}")
        extra = [line for line in reason[1:] if line.startswith("Batch system:")]
        if len(reason) > 1 and not reason[-1].startswith("Batch system:"):
            extra.append(reason[-1].strip())
        lines += [f"    {line}" for line in extra]
    lines.append(f"    stdout: {record.stdout}")
    lines.append(f"    stderr: {record.stderr}")
    if record.stderr_tail:
        lines.append("    last lines of stderr:")
        lines += [f"      | {line}" for line in record.stderr_tail.splitlines()[-10:]]
    return lines


def _align(table: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    return ["  ".join(cell.ljust(w) if i < 2 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths)))
            .rstrip() for row in table]


def _seconds(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{rest:02d}"


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(t))
