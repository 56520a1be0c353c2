"""The emulators' shared job table: one JSON document per batch system, changed only under a file lock.

Layout of the state directory (``$B2BATCH_EMULATOR_DIR``, default ``~/.b2batch/emulator``)::

    <root>/htcondor/state.json     jobs, next id, active failure injections
    <root>/htcondor/state.lock     the filelock.FileLock guarding every read-modify-write
    <root>/htcondor/specs/<g>.json what to run (argv, cwd, env, stdio files) for job group <g>
    <root>/htcondor/runners/<id>.log  stderr of the detached runner of job <id>
    <root>/lsf/...                 the same for LSF

A job record is a plain dict (JSON). Fields that change over a job's life are written through
:meth:`JobTable.update`, which keeps an undo log so that queries can show the table as it was a few
seconds ago (the ``delay`` failure injection).
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import filelock

logger = logging.getLogger(__name__)

SYSTEMS = ("htcondor", "lsf")

# Generic job statuses; each system maps them onto its own codes.
PENDING = "pending"  # waiting for a free slot
STARTING = "starting"  # a runner was spawned and claims the slots, the job process is not started yet
RUNNING = "running"
HELD = "held"  # HTCondor hold: does not run until released
EXITED = "exited"  # the job process ended (exit_code or signal tell how)
REMOVED = "removed"  # condor_rm / bkill
LOST = "lost"  # LSF host lost: UNKWN / ZOMBI forever
ACTIVE = frozenset({STARTING, RUNNING})
FINISHED = frozenset({EXITED, REMOVED})

#: Fields of a job record that change after submission (and are recorded in the undo log).
MUTABLE_FIELDS = (
    "status",
    "status_time",
    "start_time",
    "end_time",
    "exit_code",
    "signal",
    "reason",
    "hold_code",
    "hold_subcode",
    "runner",
    "proc",
    "num_starts",
    "lost_as",
    "last_status",
    # What the job used, recorded by its runner when it ends (condor_history's and bjobs' accounting).
    "cpu_user",
    "cpu_sys",
    "max_rss_kb",
    "node",
)

ENV_DIR = "B2BATCH_EMULATOR_DIR"
ENV_SLOTS = "B2BATCH_EMULATOR_SLOTS"
ENV_KEEP = "B2BATCH_EMULATOR_KEEP_SECONDS"
ENV_LOCK_TIMEOUT = "B2BATCH_EMULATOR_LOCK_TIMEOUT"

#: How long finished jobs stay visible by default: HTCondor keeps a long history, LSF forgets
#: finished jobs after CLEAN_PERIOD (one hour by default).
DEFAULT_KEEP_SECONDS = {"htcondor": 7 * 24 * 3600.0, "lsf": 3600.0}
UNDO_KEEP_SECONDS = 120.0
STATE_VERSION = 1


def emulator_root() -> Path:
    """The root state directory: ``$B2BATCH_EMULATOR_DIR`` or ``~/.b2batch/emulator``."""
    value = os.environ.get(ENV_DIR)
    if value:
        return Path(value).expanduser().absolute()
    return Path.home() / ".b2batch" / "emulator"


def slot_count() -> int:
    """Number of CPU slots of the emulated pool: ``$B2BATCH_EMULATOR_SLOTS`` or the CPU count."""
    value = os.environ.get(ENV_SLOTS)
    if value:
        try:
            return max(1, int(value))
        except ValueError:
            logger.warning("Ignoring %s=%r: not an integer", ENV_SLOTS, value)
    return os.cpu_count() or 1


def keep_seconds(system: str) -> float:
    """How long finished jobs are remembered: ``$B2BATCH_EMULATOR_KEEP_SECONDS`` or a per-system default."""
    value = os.environ.get(ENV_KEEP)
    if value:
        try:
            return float(value)
        except ValueError:
            logger.warning("Ignoring %s=%r: not a number", ENV_KEEP, value)
    return DEFAULT_KEEP_SECONDS[system]


class JobTable:
    """The loaded state document of one system: jobs by id, the id counter and the injections."""

    def __init__(self, store: Store, data: dict[str, Any]) -> None:
        self.store = store
        self.data = data
        self.dirty = False
        self.now = time.time()
        self.after_commit: list[Any] = []  # callables run once the lock is released

    @property
    def jobs(self) -> dict[str, dict[str, Any]]:
        """Job records by job id, in submission order."""
        jobs: dict[str, dict[str, Any]] = self.data["jobs"]
        return jobs

    @property
    def inject(self) -> dict[str, Any]:
        """Active failure injections (read-only view; change them with :meth:`set_inject`)."""
        inject: dict[str, Any] = self.data["inject"]
        return inject

    def set_inject(self, key: str, value: Any) -> None:
        """Set (or with ``None`` clear) one failure injection."""
        if value is None:
            self.data["inject"].pop(key, None)
        else:
            self.data["inject"][key] = value
        self.dirty = True

    def next_group_id(self) -> int:
        """Allocate the next cluster (HTCondor) or job (LSF) number."""
        value = int(self.data["next_id"])
        self.data["next_id"] = value + 1
        self.dirty = True
        return value

    def add(self, job: dict[str, Any]) -> None:
        """Insert a new job record (its ``id`` must be new)."""
        job.setdefault("undo", [])
        self.jobs[job["id"]] = job
        self.dirty = True

    def delete(self, job_id: str) -> None:
        """Forget a job completely (it vanishes from every query)."""
        if self.jobs.pop(job_id, None) is not None:
            self.dirty = True

    def exit_without_running(self, job: dict[str, Any], exit_code: int) -> None:
        """End ``job`` now with ``exit_code``, as if it had started and exited at once (an injected fate)."""
        self.update(job, status=EXITED, start_time=self.now, end_time=self.now, exit_code=exit_code,
                    num_starts=1)

    def update(self, job: dict[str, Any], **changes: Any) -> None:
        """Change mutable fields of ``job``, remembering the old values for delayed views."""
        old = {key: job.get(key) for key in changes if job.get(key) != changes[key]}
        if not old:
            return
        unknown = set(changes) - set(MUTABLE_FIELDS)
        if unknown:
            raise KeyError(f"not mutable job fields: {sorted(unknown)}")
        if "status" in old:
            changes.setdefault("status_time", self.now)
            changes.setdefault("last_status", job.get("status"))
            old.setdefault("status_time", job.get("status_time"))
            old.setdefault("last_status", job.get("last_status"))
        undo = job.setdefault("undo", [])
        horizon = self.now - max(UNDO_KEEP_SECONDS, float(self.inject.get("delay", 0)) * 2)
        undo[:] = [entry for entry in undo if entry[0] >= horizon]
        undo.append([self.now, old])
        job.update(changes)
        self.dirty = True

    def view(self, delay: float | None = None) -> list[dict[str, Any]]:
        """Job records as queries should see them: as they were ``delay`` seconds ago.

        The submission itself is always visible; with no delay the records are returned as they are.
        """
        if delay is None:
            delay = float(self.inject.get("delay", 0))
        if delay <= 0:
            return list(self.jobs.values())
        cutoff = self.now - delay
        result = []
        for job in self.jobs.values():
            late = [entry for entry in job.get("undo", []) if entry[0] > cutoff]
            if not late:
                result.append(job)
                continue
            past = copy.copy(job)
            for _, old in reversed(late):
                past.update(old)
            result.append(past)
        return result

    def group_jobs(self, group: str) -> list[dict[str, Any]]:
        """All jobs of one cluster (HTCondor) or one LSF job / array."""
        return [job for job in self.jobs.values() if job["group"] == group]


class Store:
    """Locked JSON state of one emulated batch system."""

    def __init__(self, system: str, root: Path | None = None) -> None:
        if system not in SYSTEMS:
            raise ValueError(f"unknown batch system {system!r}; known: {', '.join(SYSTEMS)}")
        self.system = system
        self.root = root if root is not None else emulator_root()
        self.dir = self.root / system
        self.state_path = self.dir / "state.json"
        self.lock_path = self.dir / "state.lock"
        self.specs_dir = self.dir / "specs"
        self.runners_dir = self.dir / "runners"

    def _ensure_dirs(self) -> None:
        for path in (self.dir, self.specs_dir, self.runners_dir):
            path.mkdir(parents=True, exist_ok=True)

    def _load(self) -> dict[str, Any]:
        try:
            text = self.state_path.read_text()
        except FileNotFoundError:
            return {"version": STATE_VERSION, "next_id": 1, "jobs": {}, "inject": {}}
        data: dict[str, Any] = json.loads(text)
        return data

    def _save(self, data: dict[str, Any]) -> None:
        tmp = self.state_path.with_name(f"state.json.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, separators=(",", ":")))
        os.replace(tmp, self.state_path)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[JobTable]:
        """Lock, load, yield the table, and save it if it changed. Deferred actions run after unlocking."""
        self._ensure_dirs()
        timeout = float(os.environ.get(ENV_LOCK_TIMEOUT, "120"))
        lock = filelock.FileLock(str(self.lock_path), timeout=timeout)
        with lock:
            table = JobTable(self, self._load())
            yield table
            if table.dirty:
                self._save(table.data)
        for action in table.after_commit:
            action()

    # Job specs: what to run. Written once at submission, read by the runner.
    def spec_path(self, group: str) -> Path:
        """The spec file of one job group."""
        return self.specs_dir / f"{group}.json"

    def write_specs(self, group: str, specs: dict[str, dict[str, Any]]) -> None:
        """Store the run specs (argv, cwd, env, stdio) of all jobs of a group."""
        self._ensure_dirs()
        path = self.spec_path(group)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(specs, separators=(",", ":")))
        os.replace(tmp, path)

    def read_spec(self, group: str, job_id: str) -> dict[str, Any]:
        """The run spec of one job."""
        specs: dict[str, dict[str, Any]] = json.loads(self.spec_path(group).read_text())
        return specs[job_id]

    def remove_specs(self, group: str) -> None:
        """Delete the spec file (and job script) of a group that left the table."""
        for path in self.specs_dir.glob(f"{group}.*"):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    def runner_log(self, job_id: str) -> Path:
        """Where the detached runner of a job writes its own diagnostics."""
        safe = job_id.replace("[", "_").replace("]", "")
        return self.runners_dir / f"{safe}.log"


def new_job(job_id: str, group: str, cpus: int, now: float, attrs: dict[str, Any]) -> dict[str, Any]:
    """A fresh pending job record."""
    return {
        "id": job_id,
        "group": group,
        "cpus": max(1, int(cpus)),
        "submit_time": now,
        "status": PENDING,
        "status_time": now,
        "last_status": None,
        "start_time": None,
        "end_time": None,
        "exit_code": None,
        "signal": None,
        "reason": None,
        "hold_code": None,
        "hold_subcode": None,
        "runner": None,
        "proc": None,
        "num_starts": 0,
        "lost_as": None,
        "attrs": attrs,
        "undo": [],
    }
