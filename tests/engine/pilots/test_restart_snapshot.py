"""A restarted steering process's first look at an earlier queue (:meth:`PooledSystem._earlier`) while its live
workers go on claiming: every unit is seen waiting or held, so none is queued a second time."""

from __future__ import annotations

from pathlib import Path

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
