"""Where a run stands, for readers in other processes: the steering process writes a small JSON file (the
*live state*) beside its logs, at most once per :data:`MIN_INTERVAL` seconds and only when the run's record
changed (a heartbeat every :data:`HEARTBEAT` seconds says it still lives). ``b2batch monitor`` reads it.

The file, ``<log folder>/b2batch-live-<start time>-<run tag>.json``, holds (format 1)::

    {"format": 1, "front_end": "luigi", "script": ..., "argv": [...], "host": ..., "pid": ..., "tag": ...,
     "started_at": epoch, "updated_at": epoch, "writes": n, "ended": false, "ended_at": null, "result": null,
     "counts": {family: {system: {state: n, "resubmitted": n}}},
     "running": [{"task", "family", "system", "job_id", "carrier", "started_at", "stdout", "stderr"}],
     "failures": [{"task", "family", "system", "job_id", "carrier", "ended_at", "reason", "stdout", "stderr"}],
     ...the front-end's own keys (joblib: "joblib": {"call", "level", "throttle"})}

``running`` lists at most :data:`MAX_RUNNING` jobs (the oldest first), ``failures`` the newest
:data:`MAX_FAILURES`; ``counts`` counts all. The file is replaced atomically, so a reader sees a whole one.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from b2batch.engine.files import atomic_write
from b2batch.engine.processes import host_name
from b2batch.engine.record import JobRecord, RunRecord

logger = logging.getLogger(__name__)

FORMAT = 1
#: Shortest time between two writes of the file (seconds).
MIN_INTERVAL = 1.0
#: Most CPU time the writes may take, as a share of the CPU time the steering process used meanwhile: a write
#: waits (beyond MIN_INTERVAL, up to MAX_INTERVAL) until the process used this many times what the last took.
CPU_SHARE = 0.01
MAX_INTERVAL = 3.0
#: Longest time between two writes while the run lives, changed or not (seconds): readers on other hosts,
#: which cannot look for the steering process, take a file older than 3 heartbeats for a run that is gone.
HEARTBEAT = 30.0
MAX_RUNNING = 200
MAX_FAILURES = 100
#: The states a job's record counts in (as the live table's columns).
STATES = ("waiting", "submitted", "queued", "running", "done", "failed", "cancelled")
PATTERN = "b2batch-live-*.json"


def state_path(folder: Path, started_at: float, tag: str) -> Path:
    """The live-state file of a run that started at ``started_at`` with the run tag ``tag``."""
    return Path(folder) / f"b2batch-live-{time.strftime('%Y%m%d-%H%M%S', time.localtime(started_at))}-{tag}.json"


class Tally:
    """The counts, running jobs and failures of a record, kept up to date change by change (a listener on the
    record), so that a write costs the same with 100 or 100,000 jobs."""

    def __init__(self, record: RunRecord) -> None:
        self.record = record
        self._lock = threading.Lock()
        self._counts: Counter[tuple[str, str, str]] = Counter()
        self._seen: dict[str, tuple[str, str, str, int]] = {}  # task id -> (family, system, state, resubmissions)
        self._running: dict[str, JobRecord] = {}
        self._failed: dict[str, JobRecord] = {}  # in the order they failed
        for (family, system), folded in list(record.folded.items()):
            for state, n in folded.states.items():
                self._counts[(family, system, state if state in STATES else "waiting")] += n
            self._counts[(family, system, "resubmitted")] += folded.resubmissions
        for job in list(record.jobs.values()):
            self.changed(job)

    def changed(self, job: JobRecord) -> None:
        """The listener: ``job`` changed its state (a few dictionary operations, in the run's thread)."""
        state = job.state if job.state in STATES else "waiting"
        key, resubmitted = job.task_id, len(job.resubmissions)
        counts = self._counts
        with self._lock:
            before = self._seen.get(key)
            if before is not None:
                if before[2] == state and before[3] == resubmitted:
                    return
                counts[(before[0], before[1], before[2])] -= 1
                if before[2] == "running":
                    self._running.pop(key, None)
                elif before[2] == "failed":
                    self._failed.pop(key, None)
            self._seen[key] = (job.family, job.system, state, resubmitted)
            counts[(job.family, job.system, state)] += 1
            if resubmitted != (before[3] if before is not None else 0):
                counts[(job.family, job.system, "resubmitted")] += resubmitted - (before[3] if before else 0)
            if state == "running":
                self._running[key] = job
            elif state == "failed":
                self._failed[key] = job
                if len(self._failed) > MAX_FAILURES:  # only the last ones are shown
                    del self._failed[next(iter(self._failed))]

    def forget(self, key: str) -> None:
        """The forgetter on the record: it let the ended job ``key`` go (its state stays counted)."""
        with self._lock:
            self._seen.pop(key, None)
            self._running.pop(key, None)

    def snapshot(self) -> dict[str, Any]:
        """The counts, running jobs and failures (not the file's header)."""
        waiting = Counter(list(self.record.expected.values()))
        with self._lock:
            counts_now = list(self._counts.items())
            running = list(self._running.values())
            failures = list(self._failed.values())[-MAX_FAILURES:]
        counts: dict[str, dict[str, dict[str, int]]] = {}
        for (family, system), n in waiting.items():
            counts.setdefault(family, {}).setdefault(system, {})["waiting"] = n
        for (family, system, state), n in counts_now:
            if n:
                row = counts.setdefault(family, {}).setdefault(system, {})
                row[state] = row.get(state, 0) + n
        running.sort(key=lambda job: job.started_at or 0.0)
        return {"counts": counts, "worker_jobs": worker_job_counts(self.record.worker_jobs.values()),
                "running": [_job(job, started_at=job.started_at) for job in running[:MAX_RUNNING]],
                "failures": [_job(job, ended_at=job.ended_at, reason=_first_line(job.reason)) for job in failures]}


def worker_job_counts(workers: Any) -> dict[str, dict[str, Any]]:
    """Per kind of worker job (pilot, bundle): how many were submitted, started and never started (of those
    that ended), and the batch job ids of those that run now."""
    kinds: dict[str, dict[str, Any]] = {}
    for worker in list(workers):
        counts = kinds.setdefault(str(worker.get("kind", "pilot")),
                                  {"submitted": 0, "started": 0, "never_started": 0, "running": []})
        counts["submitted"] += 1
        if worker.get("started_at"):
            counts["started"] += 1
        elif worker.get("ended_at"):
            counts["never_started"] += 1
        if worker.get("state") == "running":
            counts["running"].append(str(worker.get("job_id")))
    return kinds


def _job(job: JobRecord, **more: Any) -> dict[str, Any]:
    return {"task": _name(job), "family": job.family, "system": job.system,
            "job_id": job.job_ids[-1] if job.job_ids else None, "carrier": job.carrier, **more,
            "stdout": job.stdout, "stderr": job.stderr}


def _name(job: JobRecord) -> str:
    params = ", ".join(f"{k}={v}" for k, v in job.params.items())
    return f"{job.family}({params})" if params else job.family


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


class LiveState:
    """Writes the live-state file of one run from its record, in a thread of its own, while started."""

    def __init__(self, record: RunRecord, path: Path, info: dict[str, Any] | None = None,
                 interval: float = MIN_INTERVAL, heartbeat: float = HEARTBEAT) -> None:
        self.record = record
        self.path = Path(path)
        self.interval = interval
        self.heartbeat = heartbeat
        #: The front-end's own keys, written into every version of the file (e.g. front_end, script, argv).
        self.info = dict(info or {})
        self.writes = 0
        #: CPU time the writes took (seconds, the writing thread's), for benchmarks.
        self.cpu_seconds = 0.0
        self._changed = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._broken = False
        self._tally = Tally(record)
        self._last_cost = 0.0  # CPU time of the last write
        self._process_cpu = 0.0  # the process's CPU time after it

    def start(self) -> LiveState:
        self.record.listeners.append(self._tally.changed)
        self.record.forgetters.append(self._tally.forget)
        self.record.watchers.append(self._mark_changed)
        self._write()
        self._thread = threading.Thread(target=self._loop, name="b2batch-live-state", daemon=True)
        self._thread.start()
        return self

    def _mark_changed(self) -> None:
        """The record changed (called at every change of every job): the flag is set only when it is not (the
        loop clears it before it reads the record for a write, so a change is never missed)."""
        if not self._changed.is_set():
            self._changed.set()

    def note(self, **keys: Any) -> None:
        """Front-end keys that changed (e.g. a farm's lines per state): written with the next write."""
        with self._lock:
            if all(self.info.get(k) == v for k, v in keys.items()):
                return
            self.info.update(keys)
        self._changed.set()

    def stop(self, result: str = "") -> None:
        """The run ended (``result``: e.g. "success", "2 task(s) failed", "stopped by SIGTERM"): one last
        write that says so."""
        if self._mark_changed in self.record.watchers:
            self.record.watchers.remove(self._mark_changed)
        if self._tally.changed in self.record.listeners:
            self.record.listeners.remove(self._tally.changed)
        if self._tally.forget in self.record.forgetters:
            self.record.forgetters.remove(self._tally.forget)
        self._stopping.set()
        self._changed.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        self._write(ended=True, result=result)

    def _loop(self) -> None:
        last = time.monotonic()
        while not self._stopping.is_set():
            changed = self._changed.wait(max(0.0, last + self.heartbeat - time.monotonic()))
            if self._stopping.is_set():
                return
            # At most one write per interval: changes within it are taken by the next write. A write that is
            # dear against what the process does waits longer (CPU_SHARE), never beyond MAX_INTERVAL.
            if self._stopping.wait(max(0.0, last + self.interval - time.monotonic())):
                return
            while (time.process_time() - self._process_cpu < self._last_cost / CPU_SHARE
                   and time.monotonic() < last + MAX_INTERVAL):
                if self._stopping.wait(0.25):
                    return
            if changed:
                self._changed.clear()
            self._write()
            last = time.monotonic()

    def _write(self, ended: bool = False, result: str = "") -> None:
        with self._lock:
            cpu = time.thread_time()
            now = time.time()
            state = {"format": FORMAT, **self.info, "host": host_name(), "pid": os.getpid(),
                     "tag": self.info.get("tag", ""), "started_at": self.record.started_at, "updated_at": now,
                     "writes": self.writes + 1, "write_cpu_seconds": round(self.cpu_seconds, 4), "ended": ended,
                     "ended_at": now if ended else None, "result": result or None, **self._tally.snapshot()}
            try:
                if not self.writes:
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                atomic_write(self.path, json.dumps(state, default=str))
            except OSError as e:
                if not self._broken:  # once: the run goes on without it
                    logger.warning("Could not write the run's live state %s: %s", self.path, e)
                self._broken = True
                return
            finally:
                self._last_cost = time.thread_time() - cpu
                self.cpu_seconds += self._last_cost
                self._process_cpu = time.process_time()
            self.writes += 1


def start_live_state(record: RunRecord, folder: Path, tag: str, info: dict[str, Any]) -> LiveState:
    """Start writing the live state of a run into ``folder``."""
    return LiveState(record, state_path(folder, record.started_at, tag), {**info, "tag": tag}).start()
