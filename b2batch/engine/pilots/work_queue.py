"""A queue of units of work on a shared file system, from which worker jobs (pilots, bundles) claim work.

The steering process and the workers share nothing but this folder; every step is one file operation that
is atomic on a local file system and on NFS (a rename within one folder tree, or an exclusive create):

- ``todo/<name>.json``: a unit that waits. Names sort in the order units were queued.
- ``claimed/<worker>/<name>.json``: a unit a worker claimed, by renaming it out of ``todo/``. Only one
  rename of a file can succeed, so no two workers ever hold the same unit.
- ``done/<worker>.jsonl``: the runs a worker finished, one line each (appended by that worker alone); the
  exit code is also in the unit's own ``exit_code`` file.
- ``workers/<worker>.json``: a worker's heartbeat (its batch job, host, pid and a counter it raises). The
  steering process judges a worker dead when the heartbeat has not changed for ``heartbeat_timeout``
  seconds by its own clock (the clocks of the nodes and of the file server play no part).
- ``workers/<worker>.revoked``: the steering process gave the worker up; it stops at once.
- ``workers/<worker>.finish``: the steering process wants the worker's slot back (another queue's work waits
  for it); the worker ends as soon as it finds nothing to claim.
- ``cancel/<name>``: the steering process no longer wants the unit; the worker running it stops it.
- ``stop``: no more work will come; workers end when ``todo/`` is empty.
- ``cancelled``: the queue's work was cancelled on purpose (``b2batch cancel``), with the reason: its steering
  process fails what waits and what its cancelled workers held, instead of running it again.
- ``drained``: nothing waits or runs in the queue for now (more may come); a worker that finds nothing to
  claim ends after :data:`DRAIN_GRACE` seconds instead of its idle timeout.
- ``steering/<host>-<pid>-<tag>.json``: a steering process that uses the queue (its host, pid and the start
  time of that process). A queue none of whose steering processes lives is an earlier run's: a new run ends
  its pilots (:func:`b2batch.engine.pilots.kinds.end_earlier_pilots`).
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
        self._offsets: dict[str, int] = {}  # how far each worker's log of finished runs was read

    def create(self) -> None:
        for folder in (self.todo, self.claimed, self.done, self.workers, self.cancelled):
            folder.mkdir(parents=True, exist_ok=True)

    # --- the steering side --------------------------------------------------------------------------

    def put(self, name: str, unit: dict[str, Any]) -> None:
        """Queue a unit under ``name`` (a worker may claim it as soon as the rename is done). Written with
        plain system calls: the steering process queues thousands of units, and this is most of its cost."""
        todo = os.fspath(self.todo)
        temporary = f"{todo}/.{name}.{os.getpid()}.tmp"  # not a .json: no worker claims it
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            data = memoryview(json.dumps(unit).encode())
            while data:
                data = data[os.write(descriptor, data):]
        finally:
            os.close(descriptor)
        os.rename(temporary, f"{todo}/{name}.json")

    def take_back(self, name: str) -> bool:
        """Remove a unit that waits (not claimed yet); whether it was still waiting."""
        try:
            os.unlink(self.todo / f"{name}.json")
            return True
        except FileNotFoundError:
            return False

    def cancel(self, name: str) -> None:
        """Ask the worker that holds ``name`` to stop it (a unit that still waits is removed instead)."""
        if not self.take_back(name):
            (self.cancelled / name).touch()

    def drop_claim(self, worker: str, name: str) -> None:
        """Forget the claim of a worker that is gone (its unit is queued again under a new name, if at all)."""
        for path in (self.claimed / worker / f"{name}.json", self.cancelled / name):
            path.unlink(missing_ok=True)

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
        return sorted(p[:-5] for p in os.listdir(self.todo) if p.endswith(".json"))

    def claims(self) -> dict[str, str]:
        """The claimed units: name -> worker."""
        found: dict[str, str] = {}
        try:
            workers = os.listdir(self.claimed)
        except FileNotFoundError:
            return found
        for worker in workers:
            try:
                for entry in os.listdir(self.claimed / worker):
                    if entry.endswith(".json"):
                        found[entry[:-5]] = worker
            except (FileNotFoundError, NotADirectoryError):
                continue
        return found

    def take_done(self) -> dict[str, dict[str, Any]]:
        """The units whose run ended since the last call, with what the worker said of each run (its job id,
        start, end, exit code): read from where the last call stopped in each worker's log, so a poll costs
        one read per worker, not one per unit."""
        found: dict[str, dict[str, Any]] = {}
        for entry in os.listdir(self.done):
            if not entry.endswith(".jsonl"):
                continue
            offset = self._offsets.get(entry, 0)
            try:
                with open(self.done / entry, "rb") as f:
                    f.seek(offset)
                    data = f.read()
            except OSError:
                continue
            complete = data.rfind(b"\n") + 1  # a line still being written is read next time
            self._offsets[entry] = offset + complete
            for line in data[:complete].splitlines():
                try:
                    ran = json.loads(line)
                except ValueError:
                    continue
                found[ran.pop("name")] = ran
        return found

    def forget_logs(self, alive: set[str]) -> None:
        """Remove the logs of finished runs of workers not in ``alive`` (read them first)."""
        for entry in os.listdir(self.done):
            if entry.endswith(".jsonl") and entry[:-6] not in alive:
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

    def claim(self, worker: str) -> tuple[str, dict[str, Any]] | None:
        """Claim the first waiting unit: its name and description, or None when nothing waits. The folder is
        listed once and the listing used up before it is listed again, so a claim costs O(1) amortised."""
        relisted = False
        while True:
            if not self._listing:
                if relisted:
                    return None
                self._listing.extend(self.waiting())  # also when the cached listing held only units taken
                relisted = True
                continue
            name = self._listing.popleft()
            # Plain strings and system calls: a worker claims every unit it runs (pathlib cost ~0.1 ms a unit).
            target = f"{os.fspath(self.claimed)}/{worker}/{name}.json"
            try:
                os.rename(f"{os.fspath(self.todo)}/{name}.json", target)
            except FileNotFoundError:
                # Another worker took it, or the steering process took it back. On NFS a retried rename
                # that had in fact succeeded also ends up here: the unit is then ours.
                if not os.path.exists(target):
                    continue
            try:
                with open(target, "rb") as f:
                    return name, json.loads(f.read())
            except (OSError, ValueError):
                _unlink(target)  # taken back between the rename and the read
                continue

    def release(self, worker: str, name: str) -> None:
        """Put a claimed unit back, e.g. when the worker's allocation ends (it is not counted as failed); a unit
        the steering process cancelled is dropped instead."""
        claim = self.claimed / worker / f"{name}.json"
        try:
            if self.is_cancelled(name):
                claim.unlink(missing_ok=True)
                (self.cancelled / name).unlink(missing_ok=True)
            else:
                os.rename(claim, self.todo / f"{name}.json")
        except FileNotFoundError:
            pass

    def finish(self, worker: str, name: str, ran: dict[str, Any]) -> None:
        """The unit's run ended (its exit code is written): append ``ran`` (the worker's job id, the start and
        the end of the run) to the worker's log of finished runs, then drop the claim. Each worker appends to
        a log of its own, so no two writers share a file."""
        line = json.dumps({"name": name, **ran}).encode() + b"\n"
        descriptor = os.open(f"{os.fspath(self.done)}/{worker}.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(descriptor, line)
        finally:
            os.close(descriptor)
        _unlink(f"{os.fspath(self.claimed)}/{worker}/{name}.json")
        _unlink(f"{os.fspath(self.cancelled)}/{name}")

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


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
