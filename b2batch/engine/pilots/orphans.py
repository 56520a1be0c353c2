"""Pilot jobs whose steering process is gone (SIGKILLed, or lost with its node): a steering process notes in
each pilot queue it uses that it does (:meth:`~b2batch.engine.pilots.work_queue.WorkQueue.add_steering`); a new run
ends the pilots of queues none of whose steering processes lives, also when it then finds everything complete.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from b2batch.engine.files import JobFiles
from b2batch.engine.job import Job
from b2batch.engine.jobconfig import NO_SETTINGS
from b2batch.engine.outcome import has_ended
from b2batch.engine.processes import note_lives
from b2batch.engine.system import BatchSystem
from b2batch.engine.pilots.work_queue import WorkQueue
from b2batch.errors import B2BatchError

logger = logging.getLogger(__name__)


def steering_lives(about: dict[str, Any]) -> bool:
    """Whether the steering process of a queue's note still runs. One of another host is taken to run (this
    host cannot tell); its pilots end after ``pilot_idle_timeout`` once its queue is empty."""
    return note_lives(about, started="started")


def end_earlier_pilots(task_files: Path, system_of: Callable[[str], BatchSystem | None]) -> list[str]:
    """End the pilot jobs of earlier runs whose steering processes are gone (killed, or lost with their node):
    their queues under ``task_files`` are told to stop (running pilots end as soon as their task ends), units
    left waiting are taken back (a run that needs them queues them again) and pilots not started yet are
    cancelled through ``system_of(name)``, the batch system of that name. A queue that a live steering process
    uses is left alone. What was ended, as messages name it."""
    ended = []
    for todo in sorted((task_files / "_pilots").glob("*/todo")):
        queue = WorkQueue(todo.parent)
        notes = queue.steerings()
        if any(steering_lives(about) for about in notes.values()):
            continue
        jobs = [f.parent for f in queue.root.glob("jobs/*/submission.json") if not has_ended(f.parent)]
        if not jobs and not notes:
            continue
        queue.finish_all()
        queue.take_back_all()
        beats = queue.heartbeats()
        for folder in jobs:
            try:
                journal = json.loads((folder / "submission.json").read_text())
            except (OSError, ValueError):
                continue
            what = f"pilot job {journal.get('job_id')} on {journal.get('system')}"
            if folder.name in beats:
                ended.append(f"{what} (running: told to end)")
                continue
            system = system_of(str(journal.get("system")))
            if system is None:
                continue
            stub = Job(key=folder.name, name=what, family="pilot", system=system.name,
                       files=JobFiles(folder=folder, log_folder=folder), config=NO_SETTINGS,
                       job_id=str(journal.get("job_id")))
            try:
                recall = getattr(system, "recall", None)
                if recall is not None:
                    recall(stub.job_id, journal)
                system.cancel([stub])
                system.forget(stub)
                shutil.rmtree(folder, ignore_errors=True)
                ended.append(f"{what} (queued: cancelled)")
            except B2BatchError as e:
                logger.warning("Could not cancel the %s of an earlier run: %s", what, e)
        for note in notes:
            note.unlink(missing_ok=True)
    return ended
