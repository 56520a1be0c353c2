"""A restarted steering process's first look at an earlier queue (:meth:`PooledSystem._earlier`) while its live
workers go on claiming and finishing: every unit is seen waiting, held or ended, so none is queued a second
time."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers.simulated import Simulated, make_job

from b2batch.engine import Job, JobStatus, Run
from b2batch.engine.pilots import pooled_system
from b2batch.engine.pilots.kinds import PilotSystem
from b2batch.engine.pilots.pooled_system import PooledSystem
from b2batch.engine.pilots.unit_pool import UnitPool
from b2batch.engine.pilots.work_queue import WorkQueue


class ClaimedMeanwhile(WorkQueue):
    """The steering side's queue; its live worker ``w`` claims the waiting batch right after the steering side's
    second listing of the claims (the one that finds what live workers hold), before anything else is read."""

    def __init__(self, root: Path, worker: WorkQueue) -> None:
        super().__init__(root)
        self.worker = worker
        self.listings = 0

    def claimed_batches(self) -> dict[str, list[str]]:
        listed = super().claimed_batches()
        self.listings += 1
        if self.listings == 2:
            assert self.worker.claim("w") is not None
        return listed


def test_a_batch_a_live_worker_claims_during_the_snapshot_is_seen_waiting_or_held(tmp_path: Path) -> None:
    root = tmp_path / "q"
    worker = WorkQueue(root)
    queue = ClaimedMeanwhile(root, worker)
    queue.create()
    queue.put_batch("b1", [("a", {}), ("b", {})])
    worker.join("w")
    pool = UnitPool(queue=queue, template=None)  # type: ignore[arg-type]
    pool.beats["w"] = ("beat 1", 0.0, {"worker": "w"})  # a live worker of the earlier steering process
    waiting, holders = PooledSystem._earlier(None, pool)  # type: ignore[arg-type]
    assert queue.listings >= 2, "the snapshot no longer lists the claims twice: move the claim in this test"
    assert queue.claims() == {"a": "w", "b": "w"}  # the worker holds the batch now
    assert {"a", "b"} <= waiting | set(holders), (waiting, holders)


class EndsMeanwhile(WorkQueue):
    """The steering side's queue; its live worker ``w`` runs its claimed unit to its end (exit code 0) right
    after the steering side's ``at``-th listing of the claims."""

    at = 0

    def claimed_batches(self) -> dict[str, list[str]]:
        listed = super().claimed_batches()
        self.listings = getattr(self, "listings", 0) + 1
        if self.listings == self.at:
            run_to_end(self.root)
        return listed


def run_to_end(root: Path) -> None:
    WorkQueue(root).finish("w", "u1", {"job_id": "7", "worker": "w", "started": 1.0, "ended": 2.0, "exit_code": 0})


def earlier_queue(root: Path) -> None:
    """A queue a killed steering process left: live worker ``w`` holds batch b1 and runs its unit u1."""
    worker = WorkQueue(root)
    worker.create()
    worker.put_batch("b1", [("u1", {}), ("u2", {})])
    worker.join("w")
    assert worker.claim("w") is not None
    worker.started("w", "u1", 1.0)
    worker.beat("w", {"worker": "w", "job_id": "7"})


def restarted(tmp_path: Path, key: str) -> tuple[PilotSystem, Job]:
    run = Run()
    system = PilotSystem(run, Simulated(run), size=lambda pool: 1)
    job = make_job(tmp_path, key, system=system.name, heartbeat_timeout=60)
    job.files.make_folders()
    return system, job


@pytest.mark.parametrize("ends_at", [0, 1, 2, 3])
def test_a_unit_that_ends_well_before_the_restarted_run_follows_it_is_not_queued_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ends_at: int) -> None:
    """A task's unit runs in a live pilot when its front-end checks the task, and ends (exit code 0) before the
    restarted steering process follows it: before the queue is taken up (0), or between its listings (1-3).
    It is followed to that end, which the next poll reports; it is not queued again (run twice)."""
    root = tmp_path / "q"
    earlier_queue(root)
    if ends_at == 0:
        run_to_end(root)
    monkeypatch.setattr(EndsMeanwhile, "at", ends_at)
    monkeypatch.setattr(pooled_system, "WorkQueue", EndsMeanwhile)
    system, job = restarted(tmp_path, "late")
    job.files.exit_code.write_text("0\n")  # as the worker wrote it
    assert system.attach(job, {"queue": str(root), "unit": "u1"}), "the unit that ended well was not followed"
    changes = system.states([job])
    assert changes.get(job) is not None and changes[job].status == JobStatus.successful, changes
    assert not WorkQueue(root).waiting()  # nothing queued again


def test_a_unit_that_ends_while_the_restarted_run_polls_others_is_followed_to_its_end(tmp_path: Path) -> None:
    """The run follows u2 and polls before it gets to u1's task (its hand-out is sliced); u1 ends in between.
    The poll's line of u1's end is kept for u1, which is followed to that end."""
    root = tmp_path / "q"
    earlier_queue(root)
    system, other = restarted(tmp_path, "other")
    assert system.attach(other, {"queue": str(root), "unit": "u2"})
    run_to_end(root)
    assert system.states([other]) == {}
    _, job = restarted(tmp_path, "late")
    job.files.exit_code.write_text("0\n")
    assert system.attach(job, {"queue": str(root), "unit": "u1"})
    changes = system.states([job, other])
    assert job in changes and changes[job].status == JobStatus.successful, changes


def worker_of_a_gone_steering_process(root: Path) -> subprocess.Popen[bytes]:
    """An earlier queue at ``root`` whose live worker ``w`` (the process returned) holds u1 and ends with a
    steering process that is gone (a run without ``--batch`` that was killed)."""
    earlier_queue(root)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    steering = {"host": socket.gethostname(), "pid": gone.pid, "started": 1.0}
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    WorkQueue(root).beat("w", {"worker": "w", "job_id": "7", "host": socket.gethostname(), "pid": worker.pid,
                               "ends_with": steering})
    return worker


def test_a_unit_whose_worker_ends_with_a_gone_steering_process_is_not_followed_but_run_again(
        tmp_path: Path) -> None:
    """The earlier run had no ``--batch``: its pilot ends with its steering process, which was killed, so the
    pilot stops the unit it runs. The restarted run waits for that worker to end rather than follow the unit
    to that failure (CI BC, BE: a rerun reported the task "stopped by SIGTERM"); the unit then goes again."""
    root = tmp_path / "q"
    worker = worker_of_a_gone_steering_process(root)

    def stop_unit() -> None:  # what the worker does once it found its steering process gone
        time.sleep(0.5)
        queue = WorkQueue(root)
        queue.finish("w", "u1", {"job_id": "7", "worker": "w", "started": 1.0, "ended": 2.0, "exit_code": 143})
        queue.forget_worker("w")
        worker.kill()
        worker.wait()

    stopper = threading.Thread(target=stop_unit)
    stopper.start()
    try:
        system, job = restarted(tmp_path, "late")
        assert not system.attach(job, {"queue": str(root), "unit": "u1"}), "followed a unit that is being stopped"
    finally:
        stopper.join()
    assert not stopper.is_alive() and worker.poll() is not None


def test_a_worker_that_does_not_end_after_its_steering_process_went_is_followed_after_the_wait(
        tmp_path: Path, monkeypatch, caplog) -> None:
    """The earlier run's worker should stop once it found its steering process gone, but is still there after
    ENDING_WAIT (a stuck node, a worker of an older b2batch): the restarted run stops waiting, says so and
    follows its unit as any live worker's."""
    monkeypatch.setattr(pooled_system, "ENDING_WAIT", 0.5)
    root = tmp_path / "q"
    worker = worker_of_a_gone_steering_process(root)
    try:
        started = time.monotonic()
        with caplog.at_level("INFO", logger="b2batch.engine.pilots.pooled_system"):
            system, job = restarted(tmp_path, "late")
            assert system.attach(job, {"queue": str(root), "unit": "u1"}), "the stuck worker's unit was not followed"
        assert 0.5 <= time.monotonic() - started < 20
        assert "1 worker(s) of an earlier run still run" in caplog.text and "following them" in caplog.text
        assert worker.poll() is None  # nobody killed it: it may still hand in its unit
    finally:
        worker.kill()
        worker.wait()
