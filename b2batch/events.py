"""What happened to every job of a run: the one record that progress displays, summaries and timelines
read. Batch processes report to :data:`RUN`; listeners (e.g. a live progress display) are told of each
change as it happens.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class JobRecord:
    """One task's job (or jobs, when it was resubmitted) in this run."""

    task_id: str
    family: str
    params: dict[str, str]
    system: str
    job_ids: list[str] = field(default_factory=list)
    state: str = "waiting"  # waiting, submitted, queued, running, done, failed, resubmitted
    submitted_at: float | None = None
    started_at: float | None = None
    ended_at: float | None = None
    reason: str = ""
    resubmissions: list[str] = field(default_factory=list)  # the reason of each
    stdout: str = ""
    stderr: str = ""
    stderr_tail: str = ""

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


Listener = Callable[[JobRecord], None]


class RunRecord:
    """The jobs of this steering process's run, by task id."""

    def __init__(self) -> None:
        self.jobs: dict[str, JobRecord] = {}
        self.started_at = time.time()
        self.listeners: list[Listener] = []
        self._lock = threading.Lock()

    def reset(self) -> None:
        with self._lock:
            self.jobs.clear()
            self.started_at = time.time()

    def job(self, process: Any) -> JobRecord:
        task = process.task
        with self._lock:
            record = self.jobs.get(task.task_id)
            if record is None:
                record = JobRecord(task_id=task.task_id, family=task.task_family,
                                   params=task.to_str_params(only_significant=True), system=process.system_name,
                                   stdout=str(process.job_files.stdout), stderr=str(process.job_files.stderr))
                self.jobs[task.task_id] = record
        return record

    def update(self, process: Any, state: str, reason: str = "") -> None:
        """Record that the job of ``process`` is now in ``state`` (one of JobRecord.state's values)."""
        record = self.job(process)
        now = time.time()
        if state == "submitted":
            record.submitted_at = record.submitted_at or now
            if process.job_id and process.job_id not in record.job_ids:
                record.job_ids.append(process.job_id)
        elif state == "running" and record.started_at is None:
            record.started_at = now
        elif state in ("done", "failed"):
            record.ended_at = now
            record.reason = reason
            if state == "failed":
                record.stderr_tail = process.job_files.stderr_tail(10)
        elif state == "resubmitted":
            record.resubmissions.append(reason)
            record.started_at = None
        if record.state == state:
            return
        record.state = state
        for listener in list(self.listeners):
            listener(record)


RUN = RunRecord()
