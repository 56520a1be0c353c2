"""A pool of units of pilot or bundle jobs (:mod:`b2batch.engine.pilots.pooled_system`): one work queue, its units
and its worker jobs; which units may share a worker job (:func:`signature`), and how many units one queued batch
holds."""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from b2batch.engine.digests import sha1_hex
from b2batch.engine.job import Job
from b2batch.engine.system import BatchSystem
from b2batch.engine.pilots.work_queue import WorkQueue

#: The settings of the worker jobs themselves (how long they live and wait): units that differ in one of
#: them never share a worker job. The settings that shape a batch job are the inner system's
#: (``BatchSystem.job_settings``).
WORKER_SETTINGS = ("pilot_walltime", "pilot_task_seconds", "heartbeat_timeout", "pilot_idle_timeout")
#: Seconds of work that one queued batch of units holds at most, once the units' times are known.
BATCH_SECONDS = 0.5
#: Most units in one batch.
MAX_BATCH = 100
#: How many of a queue's last units' times decide the size of its batches.
RECENT_UNITS = 50


def signature(job: Job, inner: BatchSystem | type[BatchSystem]) -> str:
    """What units must share to run in one worker job of the batch system ``inner``: the settings that shape
    its jobs (none of other systems'), the worker settings and their bootstrap."""
    values = [job.bootstrap, *(job.config[name] for name in (*inner.job_settings, *WORKER_SETTINGS))]
    return sha1_hex(json.dumps(values, sort_keys=True, default=str).encode())[:12]


def unit_name(job: Job, number: int) -> str:
    return f"{number:09d}-{sha1_hex(job.key.encode())[:16]}"


@dataclass(eq=False)
class UnitPool:
    """One work queue, its units and its worker jobs."""

    queue: WorkQueue
    template: Job  # the unit whose settings the worker jobs take
    members: dict[str, Job] = field(default_factory=dict)  # unit name -> unit
    running: dict[str, str] = field(default_factory=dict)  # unit name -> worker
    carriers: dict[str, Job] = field(default_factory=dict)  # live worker jobs by key
    #: Workers seen: worker -> (heartbeat text, monotonic time it last changed, heartbeat).
    beats: dict[str, tuple[str, float, dict[str, Any]]] = field(default_factory=dict)
    started: set[str] = field(default_factory=set)  # keys of worker jobs that were seen at work
    queued_at: dict[str, float] = field(default_factory=dict)  # worker job key -> monotonic time submitted
    finishing: set[str] = field(default_factory=set)  # workers asked to give their slot back when idle
    failed_starts: int = 0
    lost: int = 0
    next_check: float = 0.0
    next_submit: float = 0.0
    failing_since: float | None = None
    submit_attempts: int = 0  # failed submissions of worker jobs in a row
    given_up: str = ""
    cancelled: str = ""  # why its work was cancelled on purpose (b2batch cancel), when it was
    drained: bool = False  # whether the queue says that nothing waits or runs in it for now
    #: Pilots were started before its first unit came (:meth:`PilotSystem.warm`): not drained until units came.
    warm: bool = False
    steering_note: Path | None = None  # the note that this steering process uses the queue
    #: How long its last units ran (their workers' word), the longest first matters.
    recent: deque[float] = field(default_factory=lambda: deque(maxlen=RECENT_UNITS))
    #: What the queue held when this steering process took it up (:meth:`PooledSystem.attach`): the units that
    #: wait, and those held by workers: name -> worker.
    earlier: tuple[set[str], dict[str, str]] | None = None
    #: The ends of units that the workers' logs told of before this steering process followed them (read as it
    #: took up a queue of an earlier one, and by its polls since): name -> log line. Such a unit, ended well
    #: after its front-end's check, is followed to that end, not run again (:meth:`PooledSystem.attach`); its
    #: line is then reported at the next poll (``replay``).
    ended_before: dict[str, dict[str, Any]] = field(default_factory=dict)
    replay: list[dict[str, Any]] = field(default_factory=list)
    #: Units tracked and journaled but not yet in the queue (a pilot queue gathers them into batches): (name,
    #: entry), in the order they came, and since when the first waits.
    staged: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    staged_since: float = 0.0
    pending: set[str] = field(default_factory=set)  # batches queued whose first start was not seen yet

    def waiting(self) -> int:
        return len(self.members) - len(self.running)

    def target_batch(self) -> int:
        """Units one batch may hold: as many as the longest of the last :data:`RECENT_UNITS` units ran in
        :data:`BATCH_SECONDS`, at most :data:`MAX_BATCH`; :data:`MAX_BATCH` while no unit has ended. Units whose
        times nobody knows yet may take hours, but they do not wait for each other: a worker holds the units of
        its batch that it has not started for :data:`~b2batch.engine.pilots.work_queue.HOLD_SECONDS` at most,
        then they go back for any worker (:mod:`~b2batch.engine.pilots.work_queue`)."""
        if not self.recent:
            return MAX_BATCH
        return max(1, min(MAX_BATCH, int(BATCH_SECONDS / max(max(self.recent), 1e-4))))

    def batch_size(self, units: int, workers: int) -> int:
        """Units per batch when ``units`` go into the queue at once for ``workers`` workers: at most
        :meth:`target_batch`, and every worker gets a batch of them."""
        return max(1, min(self.target_batch(), -(-units // max(1, workers))))

    def ran_for(self, seconds: float) -> None:
        self.recent.append(seconds)
