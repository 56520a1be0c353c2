"""The worker side of a work queue (:mod:`b2batch.engine.pilots.work_queue`): claim a batch, note in the worker's
own log when each unit's run starts and ends, put back what did not run, and write the heartbeat."""

from __future__ import annotations

import json
import os
from collections import deque
from pathlib import Path
from typing import Any

from b2batch.engine.files import atomic_write
from b2batch.engine.pilots.queue_folder import QueueFolder, Units, read_batch, unlink_if_there, write_batch


class QueueWorkerSide(QueueFolder):
    """A queue folder as a worker uses it."""

    def __init__(self, root: Path | str) -> None:
        super().__init__(root)
        self._listing: deque[str] = deque()
        self._log: tuple[str, int] | None = None  # the worker side: its name and log, open for appending

    def join(self, worker: str) -> None:
        (self.claimed / worker).mkdir(parents=True, exist_ok=True)

    def claim(self, worker: str) -> tuple[str, Units] | None:
        """Claim the first waiting batch: its name and units, or None when nothing waits. The folder is listed
        once and the listing used up before it is listed again, so a claim costs O(1) amortised."""
        relisted = False
        while True:
            if not self._listing:
                if relisted:
                    return None
                self._listing.extend(self.waiting_batches())  # also when the cached listing held only batches taken
                relisted = True
                continue
            batch = self._listing.popleft()
            target = f"{os.fspath(self.claimed)}/{worker}/{batch}.json"
            try:
                os.rename(f"{os.fspath(self.todo)}/{batch}.json", target)
            except FileNotFoundError:
                # Another worker took it, or the steering process took it back. On NFS a retried rename
                # that had in fact succeeded also ends up here: the batch is then ours.
                if not os.path.exists(target):
                    continue
            try:
                return batch, read_batch(target)
            except (OSError, ValueError):
                unlink_if_there(target)  # taken back between the rename and the read
                continue

    def started(self, worker: str, name: str, when: float) -> None:
        """Note in the worker's log that the run of ``name`` starts."""
        self._append(worker, {"name": name, "start": when})

    def finish(self, worker: str, name: str, ran: dict[str, Any]) -> None:
        """The unit's run ended (its exit code is written): append ``ran`` (the worker's job id, the start and
        the end of the run, the exit code) to the worker's log. Each worker appends to a log of its own."""
        self._append(worker, {"name": name, **ran})
        unlink_if_there(f"{os.fspath(self.cancelled)}/{name}")

    def skip(self, worker: str, name: str) -> None:
        """Drop a unit the steering process cancelled before its run started."""
        self._append(worker, {"name": name, "skipped": "cancelled"})
        unlink_if_there(f"{os.fspath(self.cancelled)}/{name}")

    def finish_batch(self, worker: str, batch: str) -> None:
        """Every unit of a claimed batch ran (or was skipped): drop the claim."""
        unlink_if_there(f"{os.fspath(self.claimed)}/{worker}/{batch}.json")

    def release(self, worker: str, batch: str, rest: Units, started: str | None = None) -> None:
        """Put the units of a claimed batch that did not run (``rest``; ``started``: one of them whose run was
        stopped) back into ``todo/``, e.g. when the worker's allocation ends (not counted as failed). The claim
        is rewritten to hold only them, then renamed back; units the steering process cancelled are dropped."""
        if started is not None:
            self._append(worker, {"name": started, "released": True})
        keep = []
        for name, unit in rest:
            if self.is_cancelled(name):
                self.skip(worker, name)
            else:
                keep.append((name, unit))
        folder = f"{os.fspath(self.claimed)}/{worker}"
        if not keep:
            unlink_if_there(f"{folder}/{batch}.json")
            return
        write_batch(folder, batch, keep)
        os.rename(f"{folder}/{batch}.json", f"{os.fspath(self.todo)}/{batch}.json")

    def give_back(self, worker: str, claim: str, kept: Units, rest: Units) -> None:
        """Put ``rest``, units of the claimed batch ``claim`` whose runs have not started, back into ``todo/`` as a
        batch of their own (named after the batch and the first of them), for any worker; the claim then holds
        ``kept`` alone. The part is written as a claim first, so that the units are never out of this worker's
        claims before they are in ``todo/`` (for a moment they are in two: :meth:`WorkQueue.requeue_claims` puts
        such units back once)."""
        folder = f"{os.fspath(self.claimed)}/{worker}"
        part = f"{claim.split('~')[0]}~{rest[0][0]}"  # unique: a unit is in one batch, and heads at most one part
        write_batch(folder, part, rest)
        write_batch(folder, claim, kept)
        os.rename(f"{folder}/{part}.json", f"{os.fspath(self.todo)}/{part}.json")

    def keep_only(self, worker: str, batch: str, kept: tuple[str, Any], rest: Units) -> str:
        """A stop signal that was not the allocation's end stopped ``kept``: it stays claimed by this worker in a
        claim of its own, ``<batch>~<name>``, started and not ended (the steering process counts it lost with the
        worker's job, as a job of its own would be), while ``rest`` goes back into ``todo/`` as :meth:`release`
        puts it; the new claim's name."""
        claim = f"{batch}~{kept[0]}"
        write_batch(f"{os.fspath(self.claimed)}/{worker}", claim, [kept])
        self.release(worker, batch, rest)
        return claim

    def _append(self, worker: str, line: dict[str, Any]) -> None:
        if self._log is None or self._log[0] != worker:
            self.close_log()
            self._log = worker, os.open(f"{os.fspath(self.done)}/{worker}.jsonl",
                                        os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.write(self._log[1], json.dumps(line).encode() + b"\n")

    def close_log(self) -> None:
        if self._log is not None:
            os.close(self._log[1])
            self._log = None


    def beat(self, worker: str, content: dict[str, Any]) -> None:
        atomic_write(self.workers / f"{worker}.json", json.dumps(content))
