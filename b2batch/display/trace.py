"""The timeline of a run: every job of every task as spans in Chrome's Trace Event Format, for Perfetto
(https://ui.perfetto.dev) or chrome://tracing. One process per batch system, one row per task; each job is a
span holding its ``queued`` and ``running`` spans; the tasks that pilot and bundle workers ran get rows of
their own per worker. It reads the run's record and the history of states :class:`RunReport` kept.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from b2batch.engine import JobRecord


def describe(family: str, params: dict[str, str]) -> str:
    """``Family(a=1, b=2)``."""
    return f"{family}({', '.join(f'{k}={v}' for k, v in params.items())})"


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
    return {**trace_head(started_at, ended_at), "traceEvents": list(trace_events(records, history, started_at,
                                                                                   ended_at))}


def trace_head(started_at: float, ended_at: float) -> dict[str, Any]:
    """The timeline's keys other than its events."""
    return {"displayTimeUnit": "ms",
            "otherData": {"started": iso_time(started_at), "ended": iso_time(ended_at), "tool": "b2batch"}}


def trace_events(records: list[JobRecord], history: dict[str, list[tuple[float, str, str | None]]],
                 started_at: float, ended_at: float) -> Iterator[dict[str, Any]]:
    """The timeline's events one at a time (:func:`trace`), so that a writer need not hold them all."""
    def us(t: float) -> int:
        return round((t - started_at) * 1e6)

    systems = sorted({r.system for r in records})
    pids = {system: i + 1 for i, system in enumerate(systems)}
    for system, pid in pids.items():
        yield {"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": system}}
    rows = [(r, attempts(history.get(r.task_id) or _history_of(r), ended_at)) for r in records]
    rows.sort(key=lambda row: min([a.submitted or a.ended or ended_at for a in row[1]], default=ended_at))
    pooled = [row for row in rows if row[0].carrier]
    rows = [row for row in rows if not row[0].carrier]
    for tid, (record, jobs) in enumerate(rows, 1):
        pid = pids[record.system]
        name = describe(record.family, record.params)
        yield {"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}}
        yield {"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid, "args": {"sort_index": tid}}
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
                yield {"name": f"{name}: submission failed", "cat": "submission", "ph": "i", "s": "t",
                       "ts": us(end), "pid": pid, "tid": tid, "args": args}
                continue
            begin, start, finish = us(job.submitted), us(job.started) if job.started else None, us(end)
            yield {"name": name, "cat": "job", "ph": "X", "ts": begin, "dur": finish - begin, "pid": pid,
                   "tid": tid, "cname": COLOURS.get(job.state, "generic_work"), "args": args}
            queued_end = start if start is not None else finish
            yield {"name": "queued", "cat": "queued", "ph": "X", "ts": begin, "dur": queued_end - begin,
                   "pid": pid, "tid": tid, "args": {"job_id": job.job_id}}
            if start is not None:
                yield {"name": "running", "cat": "running", "ph": "X", "ts": start, "dur": finish - start,
                       "pid": pid, "tid": tid, "args": {"job_id": job.job_id, "state": job.state}}
    yield from _worker_tracks(pooled, pids, len(rows) + 1, us, ended_at)


def _worker_tracks(rows: list[tuple[JobRecord, list[Attempt]]], pids: dict[str, int], first_tid: int, us: Any,
                   ended_at: float) -> Iterator[dict[str, Any]]:
    """Units that ran in worker jobs (pilots, bundles): one track per worker job, each unit a slice of it from
    its start to its end as the worker saw them."""
    tids: dict[tuple[str, str], int] = {}
    for record, _jobs in rows:
        if record.started_at is None or not record.job_ids:
            continue
        pid, job_id = pids[record.system], record.job_ids[-1]
        tid = tids.get((record.system, job_id))
        if tid is None:
            tid = tids[(record.system, job_id)] = first_tid + len(tids)
            yield {"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                   "args": {"name": record.carrier.split(" (")[0]}}
            yield {"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid,
                   "args": {"sort_index": tid}}
        begin = us(record.started_at)
        finish = us(record.ended_at if record.ended_at is not None else ended_at)
        state = record.state if record.state in ("done", "failed") else "unfinished"
        yield {"name": describe(record.family, record.params), "cat": "task", "ph": "X", "ts": begin,
               "dur": max(0, finish - begin), "pid": pid, "tid": tid, "cname": COLOURS.get(state, "generic_work"),
               "args": {"task_id": record.task_id, "job_id": job_id, "state": state, "carrier": record.carrier,
                        "reason": record.reason.splitlines()[0] if record.reason else "",
                        "stdout": record.stdout, "stderr": record.stderr}}


def iso_time(t: float) -> str:
    """``t`` as local ISO 8601 time with its offset."""
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(t))
