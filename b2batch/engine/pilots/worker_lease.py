"""A worker job's lease on its claims, its allocation and the steering process it may end with: what
:class:`~b2batch.engine.pilots.node_worker.Worker` (the loop that claims and runs units) builds on.

The worker holds a lease on its claims: it rewrites its heartbeat every ``heartbeat_timeout / 6`` seconds,
and when it cannot for ``heartbeat_timeout / 2`` seconds (the shared file system is gone) it stops its unit
and ends, before the steering process (which waits ``heartbeat_timeout``) gives the unit to another worker.
Its allocation ends at its walltime, or at the end time the batch system gives (:func:`allocation_end`); a stop
signal within :data:`END_MARGIN` seconds of it, or the batch system's warning signal, is that end. A worker whose
spec names its steering process (a run without ``--batch``, whose local pilots stand for luigi's worker processes)
ends with it: once that process is gone, it stops as SIGTERM would stop it.
"""

from __future__ import annotations

import logging
import os
import signal
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from b2batch.engine.preemption import WARNING_SIGNALS
from b2batch.engine.processes import host_name, note_lives, signal_group
from b2batch.engine.pilots.work_queue import WorkQueue

logger = logging.getLogger(__name__)

#: Seconds before the allocation's end within which a stop signal is taken as that end (Slurm's SIGTERM at the
#: time limit, HTCondor's at a hold for the job's duration): the running unit then goes back, not counted.
END_MARGIN = 120.0
#: Seconds between two looks at whether the steering process a worker ends with still runs.
STEERING_CHECK = 0.5
#: Environment variables in which batch systems give the job's id.
JOB_ID_VARIABLES = ("SLURM_JOB_ID", "LSB_JOBID", "JOB_ID", "CONDOR_JOB_ID", "B2BATCH_LOCAL_JOB_ID")


@dataclass
class WorkerConfig:
    """How a worker behaves; written by the steering process into the worker job's spec."""

    queue: str
    #: Seconds with nothing to claim before the worker ends (0: end as soon as the queue is empty).
    idle_timeout: float = 60.0
    heartbeat_timeout: float = 60.0
    #: Seconds the allocation lasts, counted from the worker's start (None: ask the scheduler, or unlimited).
    walltime: float | None = None
    #: Seconds a unit needs at most (None: the longest unit this worker ran so far).
    unit_seconds: float | None = None
    #: The batch job's id, if known; else taken from the environment.
    job_id: str | None = None
    worker: str = field(default_factory=lambda: f"{host_name()}-{os.getpid()}-{uuid.uuid4().hex[:6]}")
    #: The steering process the worker ends with (its host, pid and start time), stopping its unit as a stop
    #: signal does: a run without --batch (None: the worker outlives it, for a restarted run to follow).
    steering: dict[str, Any] | None = None
    #: The longest pause between two looks at an empty queue (the pauses double up to it): short for workers
    #: on the steering host, where a look is a local listing and a closing run waits for them to leave.
    idle_pause: float = 1.0

    @classmethod
    def of(cls, spec: dict[str, Any]) -> WorkerConfig:
        return cls(**{k: v for k, v in spec.items() if k in cls.__dataclass_fields__})


def batch_job_id() -> str:
    """This job's id, from the batch system's environment (HTCondor's as ``cluster.proc``)."""
    for name in JOB_ID_VARIABLES:
        if os.environ.get(name):
            value = os.environ[name]
            task = os.environ.get("SLURM_ARRAY_TASK_ID") if name == "SLURM_JOB_ID" else None
            if name == "SLURM_JOB_ID" and task and os.environ.get("SLURM_ARRAY_JOB_ID"):
                return f"{os.environ['SLURM_ARRAY_JOB_ID']}_{task}"
            if name == "JOB_ID" and os.environ.get("SGE_TASK_ID", "undefined") not in ("undefined", ""):
                return f"{value}.{os.environ['SGE_TASK_ID']}"
            if name == "LSB_JOBID" and os.environ.get("LSB_JOBINDEX", "0") != "0":
                return f"{value}[{os.environ['LSB_JOBINDEX']}]"
            return value
    return f"{host_name()}:{os.getpid()}"


def allocation_end(walltime: float | None, started: float) -> float | None:
    """When the allocation ends (epoch seconds): ``walltime`` after the start, else Slurm's end time of the job
    (``SLURM_JOB_END_TIME``, or ``squeue %e``), else None (unlimited)."""
    if walltime:
        return started + walltime
    if os.environ.get("SLURM_JOB_END_TIME", "").isdigit():
        return float(os.environ["SLURM_JOB_END_TIME"])
    job = os.environ.get("SLURM_JOB_ID")
    if job:
        import subprocess  # (here: a pilot elsewhere needs neither)
        from datetime import datetime

        try:
            answer = subprocess.run(["squeue", "-h", "-j", job, "-o", "%e"], capture_output=True, text=True,
                                    timeout=30, check=False).stdout.strip()
            return datetime.fromisoformat(answer).timestamp()
        except (OSError, ValueError, subprocess.SubprocessError):
            return None
    return None


class LeasedWorker:
    """A worker's queue, lease, allocation and steering process; :class:`~b2batch.engine.pilots.node_worker.Worker`
    adds the loop that claims and runs units."""

    def __init__(self, config: WorkerConfig) -> None:
        self.config = config
        self.queue = WorkQueue(config.queue)
        self.name = config.worker
        self.job_id = config.job_id or batch_job_id()
        self.started = time.time()
        self.end = allocation_end(config.walltime, self.started)
        self.beat_interval = max(0.2, config.heartbeat_timeout / 6)
        self.lease = config.heartbeat_timeout / 2
        self.beats = 0
        self.last_beat = 0.0  # monotonic time of the last heartbeat written
        self.stop_signal: int | None = None
        self.child: int | None = None
        self.current: str | None = None
        self.longest = 0.0
        self.ran = 0
        self.next_steering_check = 0.0  # monotonic time of the next look at whether the steering process is gone
        self.steering_gone_at: float | None = None  # monotonic time at which it was found gone
        #: How long the worker waits on its unit between two looks at its lease (and its steering process).
        self.wait_interval = min(self.beat_interval, STEERING_CHECK) if config.steering else self.beat_interval

    def heartbeat(self, force: bool = False) -> bool:
        """Rewrite the heartbeat if due; False when the lease is lost (stop at once)."""
        now = time.monotonic()
        if not force and now - self.last_beat < self.beat_interval:
            return True
        self.beats += 1
        try:
            self.queue.beat(self.name, {"worker": self.name, "job_id": self.job_id, "host": host_name(),
                                        "pid": os.getpid(), "beat": self.beats, "unit": self.current,
                                        "ran": self.ran, "started": self.started, "retiring": self.retiring(),
                                        "ends_with": self.config.steering})
            self.last_beat = now
        except OSError as e:
            logger.warning("Cannot write the heartbeat: %s", e)
        if now - self.last_beat > self.lease:
            logger.error("No heartbeat for %.0f s: the steering process may give my work away; stopping",
                         now - self.last_beat)
            return False
        if self.queue.is_revoked(self.name):
            logger.error("The steering process gave this worker up; stopping")
            return False
        return True

    def last_claim_margin(self) -> float:
        """Seconds that must be left in the allocation to claim a unit: the longest a unit takes, and some."""
        return (self.config.unit_seconds or self.longest) * 1.1 + 5

    def retiring(self) -> bool:
        """Whether the allocation ends within about one more unit: the steering process then submits the
        pilot that replaces this one, which is queued while this one runs its last units."""
        if self.end is None:
            return False
        return self.end - time.time() < self.last_claim_margin() + max(self.config.unit_seconds or self.longest, 10)

    def steering_gone(self) -> bool:
        """Whether the steering process this worker ends with (:attr:`WorkerConfig.steering`) is gone (looked at
        every :data:`STEERING_CHECK` seconds): the worker then stops as on SIGTERM, its running unit too."""
        now = time.monotonic()
        if self.config.steering is None or now < self.next_steering_check or self.stop_signal is not None:
            return False
        self.next_steering_check = now + STEERING_CHECK
        if note_lives(self.config.steering):
            return False
        logger.warning("The steering process %s is gone: stopping, as its run ended", self.config.steering.get("pid"))
        self.steering_gone_at = now
        self._on_signal(signal.SIGTERM, None)
        return True

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.stop_signal = signum
        if self.child is not None:
            signal_group(self.child, signal.SIGTERM)

    def out_of_time(self) -> bool:
        """Whether too little is left of the allocation for one more unit."""
        if self.end is None or self.end - time.time() >= self.last_claim_margin():
            return False
        logger.info("%.0f s left in the allocation, a unit needs up to %.0f s: ending", self.end - time.time(),
                    self.config.unit_seconds or self.longest)
        return True

    def at_the_end(self) -> bool:
        """Whether the stop signal is the allocation's end: the batch system's warning, or any stop signal within
        :data:`END_MARGIN` seconds of the walltime."""
        return self.stop_signal in WARNING_SIGNALS or (self.end is not None and self.end - time.time() < END_MARGIN)

