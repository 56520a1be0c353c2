"""A queue of units of work on a shared file system, from which worker jobs (pilots, bundles) claim work.

The steering process and the workers share nothing but this folder; every step is one file operation that
is atomic on a local file system and on NFS (a rename within one folder tree, an exclusive create, or an
append to a file that one process alone writes). Units travel in *batches*: one file holds many units, so
that queueing, claiming and reporting cost a few file operations per batch, not per unit.

- ``todo/<batch>.json``: units that wait, ``{"units": [[name, entry], ...]}`` in the order they are to run.
  Batch names sort in the order batches were queued.
- ``claimed/<worker>/<batch>.json``: a batch a worker claimed, by renaming it out of ``todo/``. Only one
  rename of a file can succeed, so no two workers ever hold the same unit. The worker runs the batch's units
  one after another and removes the file when it ran them all.
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
(:meth:`WorkQueue.requeue_claims`). A unit is thus in one place at any moment, and a unit that ended is in its
worker's log before it leaves the claim.
"""

from __future__ import annotations

import json
import os
from collections import deque
from pathlib import Path
from typing import Any

from b2batch.engine.files import atomic_write

#: Seconds a worker that finds nothing to claim in a drained queue waits for work before it ends.
DRAIN_GRACE = 2.0

Units = list[tuple[str, dict[str, Any]]]


class WorkQueue:
    """One queue folder, as seen from either side."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self.todo = self.root / "todo"
        self.claimed = self.root / "claimed"
        self.done = self.root / "done"
        self.workers = self.root / "workers"
        self.cancelled = self.root / "cancel"
        self.stop_file = self.root / "stop"
        self.cancel_note = self.root / "cancelled"
        self.drained_file = self.root / "drained"
        self.steering = self.root / "steering"
        self._listing: deque[str] = deque()
        self._offsets: dict[str, int] = {}  # how far each worker's log was read
        self._batch_of: dict[str, str] = {}  # the steering side: unit name -> the batch it was queued in
        self._log: tuple[str, int] | None = None  # the worker side: its name and log, open for appending

    def create(self) -> None:
        for folder in (self.todo, self.claimed, self.done, self.workers, self.cancelled):
            folder.mkdir(parents=True, exist_ok=True)

    # --- the steering side --------------------------------------------------------------------------

    def put(self, name: str, unit: dict[str, Any]) -> None:
        """Queue one unit under ``name`` (a batch of its own, named as the unit)."""
        self.put_batch(name, [(name, unit)])

    def put_batch(self, batch: str, units: Units) -> None:
        """Queue ``units`` (name, description) as the batch ``batch``: one file, written with plain system calls
        and renamed into ``todo/`` (a worker may claim it as soon as the rename is done)."""
        _write_batch(os.fspath(self.todo), batch, units)
        for name, _unit in units:
            self._batch_of[name] = batch

    def take_back(self, name: str) -> bool:
        """Remove a unit that waits (not claimed yet); whether it was still waiting."""
        return name in self.take_back_many([name])

    def take_back_many(self, names: list[str]) -> set[str]:
        """Remove units that wait (their batch not claimed yet); the names that were still waiting. A batch is
        taken out of ``todo/`` by a rename (so no worker claims it meanwhile), and what is left of it goes back."""
        by_batch: dict[str, set[str]] = {}
        for name in names:
            by_batch.setdefault(self._batch_of.get(name, name), set()).add(name)
        taken: set[str] = set()
        todo = os.fspath(self.todo)
        for batch, wanted in by_batch.items():
            holding = f"{todo}/.{batch}.{os.getpid()}.taking"  # not a .json: no worker claims it
            try:
                os.rename(f"{todo}/{batch}.json", holding)
            except FileNotFoundError:
                continue  # claimed by a worker, or gone
            units = _read_batch(holding)
            rest = [(name, unit) for name, unit in units if name not in wanted]
            if rest:
                _write_batch(todo, batch, rest)
            os.unlink(holding)
            for name, _unit in units:
                if name in wanted:
                    taken.add(name)
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

    def waiting_batches(self) -> list[str]:
        return sorted(p[:-5] for p in os.listdir(self.todo) if p.endswith(".json") and not p.startswith("."))

    def waiting(self) -> list[str]:
        """The units that wait, in the order they are to be claimed (reads every waiting batch)."""
        found = []
        for batch in self.waiting_batches():
            try:
                found += [name for name, _unit in _read_batch(f"{os.fspath(self.todo)}/{batch}.json")]
            except (OSError, ValueError):
                continue  # claimed meanwhile
        return found

    def index_waiting(self) -> set[str]:
        """The units that wait, each noted as in its batch (so that the steering process can take it back)."""
        found: set[str] = set()
        for batch in self.waiting_batches():
            try:
                units = _read_batch(f"{os.fspath(self.todo)}/{batch}.json")
            except (OSError, ValueError):
                continue
            for name, _unit in units:
                found.add(name)
                self._batch_of[name] = batch
        return found

    def claimed_batches(self) -> dict[str, list[str]]:
        """The claimed batches: worker -> batch names."""
        found: dict[str, list[str]] = {}
        try:
            workers = os.listdir(self.claimed)
        except FileNotFoundError:
            return found
        for worker in workers:
            try:
                found[worker] = sorted(e[:-5] for e in os.listdir(self.claimed / worker) if e.endswith(".json"))
            except (FileNotFoundError, NotADirectoryError):
                continue
        return found

    def claims(self) -> dict[str, str]:
        """The units in claimed batches: name -> worker (those the worker finished are in its log too)."""
        found: dict[str, str] = {}
        for worker, batches in self.claimed_batches().items():
            for batch in batches:
                try:
                    units = _read_batch(f"{os.fspath(self.claimed)}/{worker}/{batch}.json")
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
                units = _read_batch(f"{os.fspath(self.claimed)}/{worker}/{batch}.json")
            except (OSError, ValueError):
                continue
            held.update((name, name in started) for name, _unit in units if name not in ended)
        return held

    def log_of(self, worker: str) -> tuple[set[str], set[str]]:
        """From a worker's whole log: the units whose run started (and were not put back), those that ended."""
        started: set[str] = set()
        ended: set[str] = set()
        for line in _lines(self.done / f"{worker}.jsonl", 0)[0]:
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
        folder = f"{os.fspath(self.claimed)}/{worker}"
        for batch in self.claimed_batches().get(worker, []):
            claim = f"{folder}/{batch}.json"
            try:
                units = [(name, unit) for name, unit in _read_batch(claim) if name in keep]
            except (OSError, ValueError):
                continue
            if units:
                _write_batch(folder, batch, units)  # replaces the claim at once
                try:
                    os.rename(claim, f"{os.fspath(self.todo)}/{batch}.json")
                except FileNotFoundError:
                    continue  # another steering process of the queue put it back
                back += [name for name, _unit in units]
                self._batch_of.update((name, batch) for name, _unit in units)
            else:
                _unlink(claim)
        for name in keep:
            _unlink(f"{os.fspath(self.cancelled)}/{name}")
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
            lines, self._offsets[entry] = _lines(self.done / entry, self._offsets.get(entry, 0))
            for line in lines:
                line.setdefault("worker", entry[:-6])
            found += lines
        return found

    def take_done(self) -> dict[str, dict[str, Any]]:
        """The units whose run ended since the last call, with what the worker said of each run (its job id,
        start, end, exit code)."""
        found = {}
        for line in self.take_log():
            if "start" not in line and not line.get("released") and not line.get("skipped"):
                found[line.pop("name")] = line
        return found

    def forget_logs(self, alive: set[str]) -> None:
        """Remove the logs of workers not in ``alive`` that hold no claim (read them first)."""
        holding = set(self.claimed_batches())
        for entry in os.listdir(self.done):
            if entry.endswith(".jsonl") and entry[:-6] not in alive and entry[:-6] not in holding:
                (self.done / entry).unlink(missing_ok=True)
                self._offsets.pop(entry, None)

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

    # --- the worker side ----------------------------------------------------------------------------

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
                return batch, _read_batch(target)
            except (OSError, ValueError):
                _unlink(target)  # taken back between the rename and the read
                continue

    def started(self, worker: str, name: str, when: float) -> None:
        """Note in the worker's log that the run of ``name`` starts."""
        self._append(worker, {"name": name, "start": when})

    def finish(self, worker: str, name: str, ran: dict[str, Any]) -> None:
        """The unit's run ended (its exit code is written): append ``ran`` (the worker's job id, the start and
        the end of the run, the exit code) to the worker's log. Each worker appends to a log of its own."""
        self._append(worker, {"name": name, **ran})
        _unlink(f"{os.fspath(self.cancelled)}/{name}")

    def skip(self, worker: str, name: str) -> None:
        """Drop a unit the steering process cancelled before its run started."""
        self._append(worker, {"name": name, "skipped": "cancelled"})
        _unlink(f"{os.fspath(self.cancelled)}/{name}")

    def finish_batch(self, worker: str, batch: str) -> None:
        """Every unit of a claimed batch ran (or was skipped): drop the claim."""
        _unlink(f"{os.fspath(self.claimed)}/{worker}/{batch}.json")

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
            _unlink(f"{folder}/{batch}.json")
            return
        _write_batch(folder, batch, keep)
        os.rename(f"{folder}/{batch}.json", f"{os.fspath(self.todo)}/{batch}.json")

    def keep_interrupted(self, worker: str, batch: str, interrupted: tuple[str, Any], rest: Units) -> None:
        """A stop signal that was not the allocation's end stopped ``interrupted``: it stays claimed by this
        worker, started and not ended (the steering process counts it lost with the worker's job, as a job of
        its own would be), while ``rest`` goes back into ``todo/`` as :meth:`release` puts it."""
        folder = f"{os.fspath(self.claimed)}/{worker}"
        _write_batch(folder, f"{batch}~{interrupted[0]}", [interrupted])
        self.release(worker, batch, rest)

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

    def is_cancelled(self, name: str) -> bool:
        return os.path.exists(f"{os.fspath(self.cancelled)}/{name}")

    def is_revoked(self, worker: str) -> bool:
        return (self.workers / f"{worker}.revoked").exists()

    def stopping(self, worker: str | None = None) -> bool:
        """Whether workers (or the one named) are to end when they find nothing to claim."""
        return self.stop_file.exists() or (worker is not None and (self.workers / f"{worker}.finish").exists())

    def is_drained(self) -> bool:
        return self.drained_file.exists()

    def beat(self, worker: str, content: dict[str, Any]) -> None:
        atomic_write(self.workers / f"{worker}.json", json.dumps(content))


def _write_batch(folder: str, batch: str, units: Units) -> None:
    """Write ``folder/<batch>.json`` at once (a temporary file renamed over it)."""
    temporary = f"{folder}/.{batch}.{os.getpid()}.tmp"  # not a .json: no worker claims it
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        data = memoryview(json.dumps({"units": units}).encode())
        while data:
            data = data[os.write(descriptor, data):]
    finally:
        os.close(descriptor)
    os.rename(temporary, f"{folder}/{batch}.json")


def _read_batch(path: str) -> Units:
    with open(path, "rb") as f:
        return [(name, unit) for name, unit in json.loads(f.read())["units"]]


def _lines(path: Path, offset: int) -> tuple[list[dict[str, Any]], int]:
    """The complete lines of a log from ``offset`` on, and the offset after them (a line still being written is
    read next time)."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except OSError:
        return [], offset
    complete = data.rfind(b"\n") + 1
    found = []
    for line in data[:complete].splitlines():
        try:
            found.append(json.loads(line))
        except ValueError:
            continue
    return found, offset + complete


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
