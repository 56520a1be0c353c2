"""The detached per-job runner: starts one job process, waits for it, records how it ended.

Spawned by :func:`b2batch.emulators.slots.spawn_runner` in its own session, so it survives the
command that submitted the job. ``python -m b2batch.emulators.job_runner SYSTEM JOB_ID``.

SIGTERM asks the runner to kill its job (condor_rm, bkill, hold): the job's process group gets
SIGTERM and, after a grace period, SIGKILL.
"""

from __future__ import annotations

import logging
import os
import resource
import signal
import subprocess
import sys
import time
from types import FrameType
from typing import IO, Any

from b2batch.emulators import slots, job_table
from b2batch.emulators.slots import StartError
from b2batch.emulators.job_table import Store

logger = logging.getLogger(__name__)

KILL_GRACE_SECONDS = 3.0
POLL_SECONDS = 0.5


class _Runner:
    """State of one runner process: the job process and pending kill requests."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.kill_deadline: float | None = None
        self.runlimit_hit = False

    def request_kill(self, signum: int = signal.SIGTERM, frame: FrameType | None = None) -> None:
        """Signal handler: terminate the job's process group, escalate later."""
        if self.kill_deadline is None:
            self.kill_deadline = time.monotonic() + KILL_GRACE_SECONDS
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def wait(self, walltime: float | None) -> int:
        """Wait for the job process, enforcing kill requests and the run time limit."""
        assert self.proc is not None
        started = time.monotonic()
        while True:
            try:
                return self.proc.wait(timeout=POLL_SECONDS)
            except subprocess.TimeoutExpired:
                pass
            now = time.monotonic()
            if walltime and not self.runlimit_hit and now - started > walltime:
                self.runlimit_hit = True
                self.request_kill()
            if self.kill_deadline is not None and now > self.kill_deadline:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


def _open(what: str, path: str | None, mode: str) -> IO[bytes] | int:
    if not path:
        return subprocess.DEVNULL
    try:
        return open(path, mode)
    except OSError as exc:
        raise StartError(what, path, exc) from exc


def launch(spec: dict[str, Any]) -> subprocess.Popen[bytes]:
    """Start the job process of a spec in its own process group, with its cwd, env and stdio files."""
    handles: list[IO[bytes]] = []

    def keep(handle: IO[bytes] | int) -> IO[bytes] | int:
        if not isinstance(handle, int):
            handles.append(handle)
        return handle

    try:
        if not os.path.isdir(spec["cwd"]):
            raise StartError("cwd", spec["cwd"], FileNotFoundError(2, "No such file or directory"))
        stdin = keep(_open("stdin", spec.get("stdin"), "rb"))
        stdout = keep(_open("stdout", spec.get("stdout"), "ab" if spec.get("append_stdout") else "wb"))
        if spec.get("stderr") and spec.get("stderr") == spec.get("stdout"):
            stderr = stdout
        else:
            stderr = keep(_open("stderr", spec.get("stderr"), "ab" if spec.get("append_stderr") else "wb"))
        try:
            return subprocess.Popen(
                spec["argv"],
                cwd=spec["cwd"],
                env=spec["env"],
                stdin=stdin,
                stdout=stdout,
                stderr=stderr,
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            raise StartError("exec", spec["argv"][0], exc) from exc
    finally:
        for handle in handles:
            handle.close()


def _finish(table: job_table.JobTable, job: dict[str, Any], returncode: int, runner: _Runner) -> None:
    code, sig = (returncode, None) if returncode >= 0 else (None, -returncode)
    # What the job used, as the real schedulers account it (condor_history, bjobs): this runner's one child.
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    changes: dict[str, Any] = {"end_time": table.now, "exit_code": code, "signal": sig, "proc": None,
                               "cpu_user": round(used.ru_utime, 3), "cpu_sys": round(used.ru_stime, 3),
                               "max_rss_kb": used.ru_maxrss}
    hooks = slots.hooks_for(table.store.system)
    if job["status"] == job_table.RUNNING:
        if runner.runlimit_hit:
            changes["reason"] = "runlimit"
        table.update(job, status=job_table.EXITED, runner=None, **changes)
        hooks.finished(table, job)
    elif job["status"] == job_table.REMOVED:
        table.update(job, runner=None, **changes)
    elif job["status"] == job_table.HELD:
        table.update(job, runner=None, proc=None)


def run(system: str, job_id: str) -> int:
    """Run one job to its end; returns the runner's own exit status."""
    store = Store(system)
    hooks = slots.hooks_for(system)
    runner = _Runner()
    signal.signal(signal.SIGTERM, runner.request_kill)  # handlers reset on exec: the job gets defaults
    with store.transaction() as table:
        job = table.jobs.get(job_id)
        if job is None or job["status"] != job_table.STARTING or int(job["runner"][0]) != os.getpid():
            logger.info("Job %s: no longer ours to start", job_id)
            return 0
        spec = store.read_spec(job["group"], job_id)
        try:
            runner.proc = launch(spec)
        except StartError as error:
            logger.info("Job %s: could not start: %s", job_id, error)
            table.update(job, runner=None)
            hooks.start_failed(table, job, error)
            slots.maintain(table, hooks)
            return 0
        table.update(
            job,
            status=job_table.RUNNING,
            start_time=table.now,
            proc=slots.proc_ref(runner.proc.pid),
            num_starts=int(job.get("num_starts") or 0) + 1,
        )
        hooks.started(table, job)
    if runner.kill_deadline is not None:  # killed while we held the lock
        runner.request_kill()
    returncode = runner.wait(spec.get("walltime"))
    with store.transaction() as table:
        job = table.jobs.get(job_id)
        if job is not None and job.get("proc") and int(job["proc"][0]) == runner.proc.pid:
            _finish(table, job, returncode, runner)
        slots.maintain(table, hooks)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``runner SYSTEM JOB_ID``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m b2batch.emulators.job_runner SYSTEM JOB_ID", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s runner %(process)d %(message)s")
    return run(args[0], args[1])


if __name__ == "__main__":
    sys.exit(main())
