"""What the work queues of a task_file_dir say about the tasks in pilot and bundle jobs, for ``b2batch status``
and ``b2batch cancel``.

A task that runs in a pilot (or a bundle) has no batch job of its own: its job folder's ``submission.json``
names its work queue and its unit there (``queue``, ``unit``). The queue tells the rest
(:mod:`b2batch.engine.pilots.work_queue`): a unit in a batch in ``todo/``, or in a batch a worker claimed but whose
run has not started, waits for a pilot; one whose start is in a worker's log runs in that worker's batch job
(whose own ``submission.json`` in ``jobs/<worker>/`` has the scheduler's job id, and whose heartbeat the node),
one whose end is in the log has ended. Each queue is read once per command, however many of its units are
asked about.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from b2batch.engine.files import FILE_NAMES
from b2batch.engine.outcome import has_ended
from b2batch.engine.pilots.work_queue import WorkQueue

#: The folders of a task_file_dir that hold work queues, by the kind of worker job that serves them.
QUEUE_FOLDERS = {"_pilots": "pilot", "_bundles": "bundle"}


@dataclass
class WorkerJob:
    """A pilot or bundle job of a work queue, as its folder records it (``jobs/<worker>/``)."""

    key: str
    kind: str  # pilot or bundle
    folder: Path
    system: str
    job_id: str
    journal: dict[str, Any]
    #: The worker's heartbeat (node, pid, start), if it has started and not ended.
    beat: dict[str, Any] = field(default_factory=dict)

    @property
    def ended(self) -> bool:
        return has_ended(self.folder)


@dataclass
class UnitState:
    """Where a unit is in its queue: ``waiting``, ``running`` (claimed by ``worker``), ``ended`` (in a log of
    finished runs) or ``missing`` (in none: taken back, or an earlier run's)."""

    where: str
    worker: WorkerJob | None = None
    worker_key: str = ""
    since: float | None = None  # epoch seconds it was claimed (running) or its run ended
    job_id: str = ""  # the batch job that ran it (ended) or runs it (running)
    node: str = ""


class QueueView:
    """One work queue, read once."""

    def __init__(self, root: Path, kind: str) -> None:
        self.root = root
        self.kind = kind
        queue = WorkQueue(root)
        self._queue = queue
        try:
            self.waiting = set(queue.waiting())
        except OSError:
            self.waiting = set()
        self.claims = queue.claims()
        self.beats = {worker: beat for worker, (_text, beat) in _heartbeats(queue).items()}
        self.started, self.finished = _runs(queue)
        self.workers = _worker_jobs(root, kind, self.beats)

    def unit(self, name: str) -> UnitState:
        ran = self.finished.get(name)
        if ran is not None:
            worker_key = str(ran.get("worker", ""))
            return UnitState("ended", self.workers.get(worker_key), worker_key, ran.get("ended"),
                             str(ran.get("job_id", "")))
        worker_key = self.claims.get(name)
        start = self.started.get(name)
        if worker_key is not None and start is not None:
            worker = self.workers.get(worker_key)
            beat = self.beats.get(worker_key, {})
            job_id = (worker.job_id if worker is not None and worker.job_id else str(beat.get("job_id", "")))
            return UnitState("running", worker, worker_key, start, job_id, str(beat.get("host", "")))
        if name in self.waiting or worker_key is not None:
            return UnitState("waiting")
        return UnitState("missing")

    def cancel_all(self, reason: str) -> None:
        """Note in the queue that its work is cancelled on purpose (its steering process fails what waits)."""
        self._queue.cancel_all(reason)

    def live_workers(self) -> list[WorkerJob]:
        """The queue's worker jobs that have not written their exit code."""
        return [worker for worker in self.workers.values() if not worker.ended]


class QueueViews:
    """The work queues asked about, each read once."""

    def __init__(self) -> None:
        self.views: dict[str, QueueView] = {}

    def view(self, root: str | os.PathLike[str]) -> QueueView:
        key = os.fspath(root)
        found = self.views.get(key)
        if found is None:
            path = Path(key)
            found = self.views[key] = QueueView(path, QUEUE_FOLDERS.get(path.parent.name, "pilot"))
        return found

    def add_all(self, task_file_dir: Path) -> None:
        """Every work queue of the task_file_dir (``_pilots/*``, ``_bundles/*``)."""
        for folder in QUEUE_FOLDERS:
            try:
                roots = sorted(p for p in (task_file_dir / folder).iterdir() if p.is_dir())
            except OSError:
                continue
            for root in roots:
                self.view(root)

    def live_workers(self) -> list[WorkerJob]:
        return [worker for view in self.views.values() for worker in view.live_workers()]


def _heartbeats(queue: WorkQueue) -> dict[str, tuple[str, dict[str, Any]]]:
    try:
        return queue.heartbeats()
    except OSError:
        return {}


def _runs(queue: WorkQueue) -> tuple[dict[str, float], dict[str, dict[str, Any]]]:
    """From the workers' logs: the units whose run started and was not put back (when), and those that ended."""
    started: dict[str, float] = {}
    finished: dict[str, dict[str, Any]] = {}
    try:
        lines = queue.take_log()
    except OSError:
        return started, finished
    for line in lines:
        name = line.pop("name")
        if "start" in line:
            started[name] = float(line["start"])
        elif line.get("released"):
            started.pop(name, None)
        elif not line.get("skipped"):
            finished[name] = line
    return started, finished


def _worker_jobs(root: Path, kind: str, beats: dict[str, dict[str, Any]]) -> dict[str, WorkerJob]:
    """The worker jobs recorded in ``root/jobs/``: those submitted (with a ``submission.json``)."""
    found = {}
    try:
        folders = list((root / "jobs").iterdir())
    except OSError:
        return found
    for folder in folders:
        try:
            journal = json.loads((folder / FILE_NAMES["submission"]).read_text())
        except (OSError, ValueError):
            continue
        found[folder.name] = WorkerJob(key=folder.name, kind=kind, folder=folder, system=str(journal.get("system", "")),
                                       job_id=str(journal.get("job_id", "")), journal=journal,
                                       beat=beats.get(folder.name, {}))
    return found


def age(since: float | None, now: float | None = None) -> str:
    """How long ago ``since`` (epoch seconds) was, in words: ``42 s``, ``3 min 5 s``, ``2 h 10 min``."""
    if since is None:
        return "?"
    seconds = max(0, int((now if now is not None else time.time()) - since))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"
