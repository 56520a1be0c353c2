"""A queue of units of work on a shared file system, from which worker jobs (pilots, bundles) claim work.

The steering process and the workers share nothing but this folder; every step is one file operation that
is atomic on a local file system and on NFS (a rename within one folder tree, an exclusive create, or an
append to a file that one process alone writes). Units travel in *batches*: one file holds many units, so
that queueing, claiming and reporting cost a few file operations per batch, not per unit.

- ``todo/<batch>.json``: units that wait, ``{"units": [[name, entry], ...]}`` in the order they are to run.
  Batch names sort in the order batches were queued. An entry names the unit's files (its exit code's, its logs)
  or none of them: a unit without a job folder (a call's, whose input rides in the entry as ``unit["inline"]``)
  has its exit code in its worker's log alone and writes into its worker's logs or into log files it makes.
- ``claimed/<worker>/<batch>.json``: a batch a worker claimed, by renaming it out of ``todo/``. Only one
  rename of a file can succeed, so no two workers ever hold the same unit. The worker runs the batch's units
  one after another and removes the file when it ran them all. It holds the units it has not started for
  :data:`HOLD_SECONDS` at a time: then, between two units, half of them go back into ``todo/`` as a batch of
  their own, ``<batch>~<first unit>.json``, for any worker (all of them while a unit runs long), and the claim
  is rewritten to hold the rest. So a batch may hold many units whose times nobody knows yet: none waits long
  behind another, and idle workers share what a busy one holds.
- ``done/<worker>.jsonl``: what a worker did, one line per step, appended by that worker alone:
  ``{"name", "start"}`` when a unit's run starts, ``{"name", "exit_code", "started", "ended", ...}`` when it
  ended (the exit code is also in the unit's own ``exit_code`` file), ``{"name", "released": true}`` when
  the worker put a started unit back (its allocation ended), ``{"name", "skipped": ...}`` when it dropped a
  unit the steering process had cancelled. The steering process reads each log from where it stopped: one
  read per worker and poll, however many units ended.
- ``workers/<worker>.json``: a worker's heartbeat (its batch job, host, pid and a counter it raises). The
  steering process judges a worker dead when the heartbeat has not changed for ``heartbeat_timeout``
  seconds by its own clock (the clocks of the nodes and of the file server play no part).
- ``workers/<worker>.revoked``: the steering process gave the worker up; it stops at once.
- ``workers/<worker>.finish``: the steering process wants the worker's slot back (another queue's work waits
  for it); the worker ends as soon as it finds nothing to claim.
- ``cancel/<name>``: the steering process no longer wants the unit; the worker running it stops it, one
  that holds it in a claimed batch skips it.
- ``stop``: no more work will come; workers end when ``todo/`` is empty.
- ``cancelled``: the queue's work was cancelled on purpose (``b2batch cancel``), with the reason: its steering
  process fails what waits and what its cancelled workers held, instead of running it again.
- ``drained``: nothing waits or runs in the queue for now (more may come); a worker that finds nothing to
  claim ends after :data:`DRAIN_GRACE` seconds instead of its idle timeout.
- ``steering/<host>-<pid>-<tag>.json``: a steering process that uses the queue (its host, pid and the start
  time of that process). A queue none of whose steering processes lives is an earlier run's: a new run ends
  its pilots (:func:`b2batch.engine.pilots.kinds.end_earlier_pilots`).

Restarts: a batch leaves a worker's claim only by one rename back into ``todo/``, after the claim file was
rewritten (atomically) to hold only the units still to run: by the worker when it stops early
(:meth:`WorkQueue.release`), or by the steering process for a worker that is gone
(:meth:`WorkQueue.requeue_claims`), or as a part handed back (:meth:`~QueueWorkerSide.give_back`). A unit is
thus in one place at any moment (or, for a moment, in two claims of one worker: a part handed back is written as
a claim before the batch's claim is rewritten, and :meth:`WorkQueue.requeue_claims` puts such a unit back once),
and a unit that ended is in its worker's log before it leaves the claim.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from b2batch.engine.files import atomic_write
from b2batch.engine.pilots.queue_folder import Units, log_lines, read_batch, unlink_if_there, write_batch
from b2batch.engine.pilots.queue_worker_side import QueueWorkerSide

#: Seconds a worker that finds nothing to claim in a drained queue waits for work before it ends.
DRAIN_GRACE = 2.0
#: Seconds a worker holds the units of a claimed batch that it has not started; then they go back.
HOLD_SECONDS = 0.5

__all__ = ["DRAIN_GRACE", "HOLD_SECONDS", "Units", "WorkQueue", "is_end"]


def is_end(line: dict[str, Any]) -> bool:
    """Whether a worker's log line tells of a unit's end (not its start, nor its being put back or skipped)."""
    return "start" not in line and not line.get("released") and not line.get("skipped")


class WorkQueue(QueueWorkerSide):
    """One queue folder, as seen from either side: the steering side here, the worker side in
    :class:`~b2batch.engine.pilots.queue_worker_side.QueueWorkerSide`."""

    def __init__(self, root: Path | str) -> None:
        super().__init__(root)
        self._offsets: dict[str, int] = {}  # how far each worker's log was read
        self._news: dict[str, int] = {}  # the size of each worker's log when has_news() last said it grew
        self._batch_of: dict[str, str] = {}  # the steering side: unit name -> the batch it was queued in

    # --- the steering side --------------------------------------------------------------------------

    def put(self, name: str, unit: dict[str, Any]) -> None:
        """Queue one unit under ``name`` (a batch of its own, named as the unit)."""
        self.put_batch(name, [(name, unit)])

    def put_batch(self, batch: str, units: Units) -> None:
        """Queue ``units`` (name, description) as the batch ``batch``: one file, written with plain system calls
        and renamed into ``todo/`` (a worker may claim it as soon as the rename is done)."""
        write_batch(os.fspath(self.todo), batch, units)
        for name, _unit in units:
            self._batch_of[name] = batch

    def take_back(self, name: str) -> bool:
        """Remove a unit that waits (not claimed yet); whether it was still waiting."""
        return name in self.take_back_many([name])

    def take_back_many(self, names: list[str]) -> set[str]:
        """Remove units that wait (their batch not claimed yet); the names that were still waiting. A batch is
        taken out of ``todo/`` by a rename (so no worker claims it meanwhile), and what is left of it goes back.
        A unit not in the batch it was queued in may wait in a part of it a worker handed back
        (``<batch>~<unit>``): those are looked for in one listing of ``todo/``."""
        by_batch: dict[str, set[str]] = {}
        for name in names:
            by_batch.setdefault(self._batch_of.get(name, name), set()).add(name)
        taken: set[str] = set()
        for batch, wanted in by_batch.items():
            taken |= self._take_from(batch, wanted)
        missing = {batch: wanted - taken for batch, wanted in by_batch.items() if wanted - taken}
        if missing:
            for part in self.waiting_batches():
                root, handed_back, _unit = part.partition("~")
                if handed_back and missing.get(root):
                    got = self._take_from(part, missing[root])
                    taken |= got
                    missing[root] -= got
        return taken

    def _take_from(self, batch: str, wanted: set[str]) -> set[str]:
        """Take the units of ``wanted`` out of the waiting batch ``batch``; those it held."""
        todo = os.fspath(self.todo)
        holding = f"{todo}/.{batch}.{os.getpid()}.taking"  # not a .json: no worker claims it
        try:
            os.rename(f"{todo}/{batch}.json", holding)
        except FileNotFoundError:
            return set()  # claimed by a worker, or gone
        units = read_batch(holding)
        rest = [(name, unit) for name, unit in units if name not in wanted]
        if rest:
            write_batch(todo, batch, rest)
        os.unlink(holding)
        taken = {name for name, _unit in units if name in wanted}
        for name in taken:
            self._batch_of.pop(name, None)
        return taken

    def take_back_all(self) -> None:
        """Remove every unit that waits."""
        todo = os.fspath(self.todo)
        for batch in self.waiting_batches():
            holding = f"{todo}/.{batch}.{os.getpid()}.taking"
            try:
                os.rename(f"{todo}/{batch}.json", holding)
            except FileNotFoundError:
                continue
            os.unlink(holding)

    def cancel(self, name: str) -> None:
        """Ask the worker that holds ``name`` to stop it (a unit that still waits is removed instead)."""
        self.cancel_many([name])

    def cancel_many(self, names: list[str]) -> None:
        for name in set(names) - self.take_back_many(names):
            (self.cancelled / name).touch()

    def batch_of(self, name: str) -> str:
        """The batch in which the steering process queued ``name`` ("" if not known)."""
        return self._batch_of.get(name, "")

    def forget_unit(self, name: str) -> None:
        """The steering process no longer follows the unit (it ended, or went back to the run)."""
        self._batch_of.pop(name, None)

    def revoke(self, worker: str) -> None:
        (self.workers / f"{worker}.revoked").touch()

    def finish_all(self) -> None:
        """Say that no more work will come."""
        self.stop_file.touch()

    def cancel_all(self, reason: str) -> None:
        """Say that the queue's work is cancelled on purpose, and why (``b2batch cancel``)."""
        atomic_write(self.cancel_note, reason + "\n")

    def cancel_reason(self) -> str:
        """Why the queue's work was cancelled on purpose; "" if it was not."""
        try:
            with open(self.cancel_note) as f:
                return f.read().strip()
        except FileNotFoundError:
            return ""

    def drain(self, drained: bool) -> None:
        """Say that nothing waits or runs in the queue for now (True), or that work came again (False)."""
        if drained:
            self.drained_file.touch()
        else:
            self.drained_file.unlink(missing_ok=True)

    def add_steering(self, name: str, about: dict[str, Any]) -> Path:
        """Note that the steering process ``name`` uses the queue; the note's path."""
        self.steering.mkdir(exist_ok=True)
        path = self.steering / f"{name}.json"
        atomic_write(path, json.dumps(about))
        return path

    def steerings(self) -> dict[Path, dict[str, Any]]:
        """The notes of the steering processes that use (or used) the queue."""
        found: dict[Path, dict[str, Any]] = {}
        try:
            entries = os.listdir(self.steering)
        except FileNotFoundError:
            return found
        for entry in entries:
            if entry.endswith(".json"):
                try:
                    found[self.steering / entry] = json.loads((self.steering / entry).read_text())
                except (OSError, ValueError):
                    continue
        return found

    def finish_worker(self, worker: str) -> None:
        """Ask one worker to end as soon as it finds nothing to claim (its slot is wanted elsewhere)."""
        (self.workers / f"{worker}.finish").touch()

    def waiting(self) -> list[str]:
        """The units that wait, in the order they are to be claimed (reads every waiting batch)."""
        found = []
        for batch in self.waiting_batches():
            try:
                found += [name for name, _unit in read_batch(f"{os.fspath(self.todo)}/{batch}.json")]
            except (OSError, ValueError):
                continue  # claimed meanwhile
        return found

    def index_waiting(self) -> set[str]:
        """The units that wait, each noted as in its batch (so that the steering process can take it back)."""
        found: set[str] = set()
        for batch in self.waiting_batches():
            try:
                units = read_batch(f"{os.fspath(self.todo)}/{batch}.json")
            except (OSError, ValueError):
                continue
            for name, _unit in units:
                found.add(name)
                self._batch_of[name] = batch
        return found

    def claims(self) -> dict[str, str]:
        """The units in claimed batches: name -> worker (those the worker finished are in its log too)."""
        found: dict[str, str] = {}
        for worker, batches in self.claimed_batches().items():
            for batch in batches:
                try:
                    units = read_batch(f"{os.fspath(self.claimed)}/{worker}/{batch}.json")
                except (OSError, ValueError):
                    continue
                found.update((name, worker) for name, _unit in units)
        return found

    def held(self, worker: str) -> dict[str, bool]:
        """The units a worker holds and did not finish (by its whole log): name -> whether its run started."""
        started, ended = self.log_of(worker)
        held: dict[str, bool] = {}
        for batch in self.claimed_batches().get(worker, []):
            try:
                units = read_batch(f"{os.fspath(self.claimed)}/{worker}/{batch}.json")
            except (OSError, ValueError):
                continue
            held.update((name, name in started) for name, _unit in units if name not in ended)
        return held

    def log_of(self, worker: str) -> tuple[set[str], set[str]]:
        """From a worker's whole log: the units whose run started (and were not put back), those that ended."""
        started: set[str] = set()
        ended: set[str] = set()
        for line in log_lines(self.done / f"{worker}.jsonl", 0)[0]:
            if "start" in line:
                started.add(line["name"])
            elif line.get("released"):
                started.discard(line["name"])
            else:
                ended.add(line["name"])
        return started, ended

    def requeue_claims(self, worker: str, keep: set[str]) -> list[str]:
        """Put the units of ``keep`` that a gone worker holds back into ``todo/`` (each claimed batch rewritten to
        hold only those, then renamed back); the rest of its claims is dropped. The units put back."""
        back: list[str] = []
        went: set[str] = set()
        folder = f"{os.fspath(self.claimed)}/{worker}"
        for batch in self.claimed_batches().get(worker, []):
            claim = f"{folder}/{batch}.json"
            try:  # a unit in two claims (the worker was gone in the middle of give_back) goes back once
                units = [(name, unit) for name, unit in read_batch(claim) if name in keep and name not in went]
            except (OSError, ValueError):
                continue
            if units:
                write_batch(folder, batch, units)  # replaces the claim at once
                try:
                    os.rename(claim, f"{os.fspath(self.todo)}/{batch}.json")
                except FileNotFoundError:
                    continue  # another steering process of the queue put it back
                back += [name for name, _unit in units]
                went.update(name for name, _unit in units)
                self._batch_of.update((name, batch) for name, _unit in units)
            else:
                unlink_if_there(claim)
        for name in keep:
            unlink_if_there(f"{os.fspath(self.cancelled)}/{name}")
        return back

    def drop_claims(self, worker: str) -> None:
        """Forget every claim of a worker that is gone (its units were dealt with)."""
        self.requeue_claims(worker, set())

    def take_log(self) -> list[dict[str, Any]]:
        """The lines the workers wrote to their logs since the last call (each with its ``worker``), each worker's
        in order: read from where the last call stopped in each log, so a poll costs one read per worker, not
        one per unit."""
        found: list[dict[str, Any]] = []
        for entry in os.listdir(self.done):
            if not entry.endswith(".jsonl"):
                continue
            lines, self._offsets[entry] = log_lines(self.done / entry, self._offsets.get(entry, 0))
            for line in lines:
                line.setdefault("worker", entry[:-6])
            found += lines
        return found

    def has_news(self) -> bool:
        """Whether a worker's log grew since :meth:`take_log` read it and since this was last asked (one listing
        and a stat per log; each growth is news once: a line still being written makes no busy wait)."""
        try:
            entries = os.listdir(self.done)
        except OSError:
            return False
        news = False
        for entry in entries:
            if entry.endswith(".jsonl"):
                try:
                    size = os.stat(f"{self.done}/{entry}").st_size
                except OSError:
                    continue
                if size > max(self._offsets.get(entry, 0), self._news.get(entry, 0)):
                    self._news[entry] = size
                    news = True
        return news

    def take_done(self) -> dict[str, dict[str, Any]]:
        """The units whose run ended since the last call, with what the worker said of each run (its job id,
        start, end, exit code)."""
        found = {}
        for line in self.take_log():
            if is_end(line):
                found[line.pop("name")] = line
        return found

    def forget_logs(self, alive: set[str]) -> None:
        """Remove the logs of workers not in ``alive`` that hold no claim (read them first)."""
        holding = set(self.claimed_batches())
        for entry in os.listdir(self.done):
            if entry.endswith(".jsonl") and entry[:-6] not in alive and entry[:-6] not in holding:
                (self.done / entry).unlink(missing_ok=True)
                self._offsets.pop(entry, None)
                self._news.pop(entry, None)

    def heartbeats(self) -> dict[str, tuple[str, dict[str, Any]]]:
        """Every worker's heartbeat: worker -> (raw text, parsed)."""
        beats: dict[str, tuple[str, dict[str, Any]]] = {}
        for entry in os.listdir(self.workers):
            if not entry.endswith(".json"):
                continue
            try:
                text = (self.workers / entry).read_text()
                beats[entry[:-5]] = (text, json.loads(text))
            except (OSError, ValueError):
                continue
        return beats

    def forget_worker(self, worker: str) -> None:
        """Remove what is left of a worker that ended: its heartbeat, revocation and (empty) claim folder."""
        for path in (self.workers / f"{worker}.json", self.workers / f"{worker}.revoked",
                     self.workers / f"{worker}.finish"):
            path.unlink(missing_ok=True)
        try:
            (self.claimed / worker).rmdir()
        except OSError:
            pass
