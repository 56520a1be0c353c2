"""Slot accounting, detached runner spawning, liveness checks and killing for the emulated pools.

Every emulator command calls :func:`maintain` inside its transaction: it forgets old finished jobs,
notices jobs whose runner died (machine reboot, killed runner), and starts pending jobs while slots
are free. A finishing runner calls it too, so the queue drains without any daemon.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Protocol

import psutil

from b2batch.emulators import nodes, job_table
from b2batch.emulators.job_table import JobTable, Store

logger = logging.getLogger(__name__)

#: Runner processes spawned by this process, polled so they never linger as zombies.
_CHILDREN: list[subprocess.Popen[bytes]] = []
_PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])
#: Script that starts a tool or runner without importing the b2batch package (and luigi).
ENTRY = str(Path(__file__).resolve().with_name("_entry.py"))


class SystemHooks(Protocol):
    """What a batch system adds to the generic job life cycle (event logs, LSF job reports, ...)."""

    def intercept_start(self, table: JobTable, job: dict[str, Any]) -> bool:
        """Apply an injected fate instead of starting the job; True if the job must not start."""

    def started(self, table: JobTable, job: dict[str, Any]) -> None:
        """The job process was started."""

    def finished(self, table: JobTable, job: dict[str, Any]) -> None:
        """The job process ended and the record says how (status EXITED)."""

    def start_failed(self, table: JobTable, job: dict[str, Any], error: StartError) -> None:
        """The job could not be started (missing executable, unwritable output, ...)."""

    def lost(self, table: JobTable, job: dict[str, Any]) -> None:
        """The job's runner vanished (reboot): requeue or fail the job."""


class StartError(Exception):
    """A job could not be started; ``what`` is one of exec, stdin, stdout, stderr, cwd."""

    def __init__(self, what: str, path: str, error: OSError) -> None:
        super().__init__(f"{what} {path}: {error.strerror}")
        self.what = what
        self.path = path
        self.errno = error.errno or 0
        self.strerror = error.strerror or str(error)


#: The module of each emulated system's commands.
TOOLS_MODULE = {"htcondor": "condor_tools", "lsf": "lsf_tools"}


def hooks_for(system: str) -> SystemHooks:
    """The hooks object of one system's emulator module."""
    module = importlib.import_module(f"b2batch.emulators.{TOOLS_MODULE[system]}")
    hooks: SystemHooks = module.HOOKS
    return hooks


def proc_ref(pid: int) -> list[float]:
    """A (pid, create time) pair that identifies a process despite pid reuse."""
    try:
        return [pid, psutil.Process(pid).create_time()]
    except psutil.Error:
        return [pid, 0.0]


def alive(ref: list[float] | None) -> bool:
    """Whether the process named by a :func:`proc_ref` pair still runs (zombies count as dead)."""
    if not ref or not ref[1]:
        return False
    try:
        process = psutil.Process(int(ref[0]))
        if abs(process.create_time() - ref[1]) > 0.5:
            return False
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def kill_group(ref: list[float] | None, sig: int) -> None:
    """Send ``sig`` to the process group led by the process of ``ref`` if that process is ours."""
    if ref and alive(ref):
        try:
            os.killpg(int(ref[0]), sig)
        except (ProcessLookupError, PermissionError):
            pass


def stop(table: JobTable, job: dict[str, Any]) -> None:
    """Terminate a job's process once the transaction is committed (the record must already say why).

    The runner gets SIGTERM and kills the job's process group (SIGTERM, then SIGKILL after a grace
    period); without a live runner the job's group is killed at once.
    """
    runner, proc = job.get("runner"), job.get("proc")

    def act() -> None:
        if alive(runner):
            try:
                os.kill(int(runner[0]), signal.SIGTERM)  # type: ignore[index]
                return
            except ProcessLookupError:
                pass
        kill_group(proc, signal.SIGKILL)

    table.after_commit.append(act)


def _reap_children() -> None:
    _CHILDREN[:] = [child for child in _CHILDREN if child.poll() is None]


def spawn_runner(store: Store, job_id: str) -> list[float]:
    """Start the detached runner of one job (its own session; it outlives the caller)."""
    _reap_children()
    env = dict(os.environ)
    env[job_table.ENV_DIR] = str(store.root)
    parts = [_PACKAGE_PARENT] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(parts))
    with open(store.runner_log(job_id), "ab") as log:
        child = subprocess.Popen(
            [sys.executable, ENTRY, "runner", store.system, job_id],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            cwd=str(store.dir),
            env=env,
            start_new_session=True,
            close_fds=True,
        )
    _CHILDREN.append(child)
    return proc_ref(child.pid)


def purge(table: JobTable) -> None:
    """Forget finished (and lost) jobs older than the retention time, with their spec files."""
    horizon = table.now - job_table.keep_seconds(table.store.system)
    old = [
        job["id"]
        for job in table.jobs.values()
        if job["status"] in (job_table.EXITED, job_table.REMOVED, job_table.LOST) and job["status_time"] < horizon
    ]
    if not old:
        return
    groups = {table.jobs[job_id]["group"] for job_id in old}
    for job_id in old:
        table.delete(job_id)
        with contextlib.suppress(FileNotFoundError):
            table.store.runner_log(job_id).unlink()
    remaining = {job["group"] for job in table.jobs.values()}
    for group in groups - remaining:
        table.store.remove_specs(group)


def reap(table: JobTable, hooks: SystemHooks) -> None:
    """Handle jobs whose runner is gone: unstarted ones wait again, started ones are lost."""
    for job in list(table.jobs.values()):
        if job["status"] not in job_table.ACTIVE or alive(job.get("runner")):
            continue
        if job["status"] == job_table.STARTING:
            logger.warning("Job %s: runner vanished before starting the job; requeued", job["id"])
            table.update(job, status=job_table.PENDING, runner=None)
        else:
            logger.warning("Job %s: runner vanished while the job ran", job["id"])
            kill_group(job.get("proc"), signal.SIGKILL)
            hooks.lost(table, job)


def schedule(table: JobTable, hooks: SystemHooks) -> None:
    """Start pending jobs, in submission order, while their CPUs fit into the free slots."""
    slots = job_table.slot_count()
    active = [job for job in table.jobs.values() if job["status"] in job_table.ACTIVE]
    used = sum(job["cpus"] for job in active)
    per_group = Counter(job["group"] for job in active)
    for job in table.jobs.values():
        if used >= slots:
            break
        if job["status"] != job_table.PENDING or job["cpus"] > slots - used:
            continue
        limit = job["attrs"].get("_array_limit")
        if limit and per_group[job["group"]] >= limit:
            continue
        node = nodes.pick(table, job)
        if node is None:  # every node it may run on is excluded: it waits, as on a real cluster
            continue
        table.update(job, node=node)
        if nodes.is_bad(table, node):
            fail = getattr(hooks, "node_failed", None)
            if fail is not None:
                fail(table, job)
                continue
        if hooks.intercept_start(table, job):
            continue
        try:
            runner = spawn_runner(table.store, job["id"])
        except OSError as exc:  # out of processes or memory: leave it pending, retry on the next command
            logger.warning("Job %s: cannot spawn its runner: %s", job["id"], exc)
            break
        table.update(job, status=job_table.STARTING, runner=runner)
        used += job["cpus"]
        per_group[job["group"]] += 1


def maintain(table: JobTable, hooks: SystemHooks | None = None) -> None:
    """Housekeeping done by every command: purge, reap dead runners, schedule."""
    hooks = hooks or hooks_for(table.store.system)
    purge(table)
    reap(table, hooks)
    schedule(table, hooks)
