"""The ``local`` batch system: jobs are background processes of this machine, a limited number at once.

It runs the same wrapper as every other batch system, so the whole batch path runs and is tested anywhere.
"""

from __future__ import annotations

import collections
import logging
import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

import psutil

from b2batch.process import BatchProcess, JobStatus
from b2batch.settings import get_setting

logger = logging.getLogger(__name__)


#: Seconds a killed job has to end after SIGTERM (its task unwinds, removing temporary outputs) before its
#: process group gets SIGKILL.
KILL_GRACE = 10.0


class _Pool:
    """Starts waiting jobs when a slot is free; shared by all local jobs of the steering process.

    luigi asks every running job about once a second, so a question costs O(1): the pool checks its
    running processes at most every ``UPDATE_INTERVAL`` seconds, not once per question.
    """

    UPDATE_INTERVAL = 0.2

    def __init__(self) -> None:
        self.waiting: collections.OrderedDict[str, LocalProcess] = collections.OrderedDict()
        self.running: dict[str, subprocess.Popen[bytes]] = {}
        self.ended: dict[str, int] = {}
        self.lock = threading.Lock()
        self.counter = 0
        self._updated_at = 0.0
        #: Jobs of an earlier steering process followed by this one: their wrapper process and exit-code file.
        self.adopted: dict[str, tuple[psutil.Process, Path]] = {}
        self._wrappers: dict[str, psutil.Process] | None = None
        self._wrappers_at = 0.0

    def slots(self) -> int:
        value = get_setting("local_slots")
        return int(value) if value else (os.cpu_count() or 1)

    def submit(self, job: LocalProcess) -> str:
        with self.lock:
            self.counter += 1
            job_id = f"{os.getpid()}.{self.counter}"
            self.waiting[job_id] = job
            self._updated_at = 0.0
        return job_id

    def update(self, force: bool = False) -> None:
        with self.lock:
            now = time.monotonic()
            if not force and now - self._updated_at < self.UPDATE_INTERVAL:
                return
            self._updated_at = now
            for job_id, popen in list(self.running.items()):
                code = popen.poll()
                if code is not None:
                    self.ended[job_id] = code
                    del self.running[job_id]
            for job_id, (process, exit_code_file) in list(self.adopted.items()):
                if not _running(process):
                    self.ended[job_id] = _read_code(exit_code_file)
                    del self.adopted[job_id]
            if not self.waiting:
                return
            slots = self.slots()
            while self.waiting and len(self.running) + len(self.adopted) < slots:
                job_id, job = self.waiting.popitem(last=False)
                self.running[job_id] = subprocess.Popen(
                    [str(job.job_files.wrapper)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL, start_new_session=True,
                )

    def status(self, job: LocalProcess) -> JobStatus:
        self.update()
        job_id = str(job.job_id)
        if job_id in self.running or job_id in self.adopted:
            return JobStatus.running
        if job_id in self.ended:
            return JobStatus.successful if self.ended[job_id] == 0 else JobStatus.aborted
        return JobStatus.idle if job_id in self.waiting else JobStatus.aborted

    def kill(self, jobs: list[LocalProcess], grace: float = KILL_GRACE) -> None:
        """SIGTERM to each job's process group; SIGKILL to those still there after ``grace`` seconds."""
        signalled: list[Any] = []
        with self.lock:
            for job in jobs:
                job_id = str(job.job_id)
                if self.waiting.pop(job_id, None) is not None:
                    self.ended[job_id] = -signal.SIGTERM
                elif job_id in self.running:
                    signalled.append(self.running[job_id])
                elif job_id in self.adopted:
                    signalled.append(self.adopted[job_id][0])
        for process in signalled:
            _signal_group(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for process in signalled:
            if not _wait(process, max(0.0, deadline - time.monotonic())):
                logger.warning("Local job (pid %d) did not end %g s after SIGTERM: sending SIGKILL", process.pid,
                               grace)
                _signal_group(process.pid, signal.SIGKILL)
                _wait(process, 30.0)
        self.update(force=True)

    def adopt(self, job_id: str, process: psutil.Process, exit_code_file: Path) -> None:
        """Follow a job that an earlier steering process started and that still runs."""
        with self.lock:
            self.adopted[job_id] = (process, exit_code_file)

    def wrapper_process(self, wrapper: Path) -> psutil.Process | None:
        """The running process of the executable wrapper ``wrapper``, if any (one scan of the process table
        answers for every job of a restarted run)."""
        now = time.monotonic()
        if self._wrappers is None or now - self._wrappers_at > 5.0:
            self._wrappers, self._wrappers_at = {}, now
            for process in psutil.process_iter(["cmdline"]):
                for arg in process.info["cmdline"] or ():
                    if arg.endswith("executable_wrapper.sh"):
                        self._wrappers[arg] = process
        process = self._wrappers.get(str(wrapper))
        return process if process is not None and _running(process) else None


def _signal_group(pid: int, signum: int) -> None:
    """Signal the job's process group (its wrapper started a session of its own, so the group is its pid)."""
    try:
        os.killpg(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _wait(process: Any, timeout: float) -> bool:
    """Wait for a child (Popen) or an adopted process (psutil) to end; whether it did."""
    try:
        process.wait(timeout=timeout)
        return True
    except (subprocess.TimeoutExpired, psutil.TimeoutExpired):
        return False


def _running(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _read_code(path: Path) -> int:
    """The exit code an adopted job's wrapper wrote (-1, a failure, if it wrote none: it was killed)."""
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return -1


class LocalProcess(BatchProcess):
    """One task as a background process on this machine."""

    system_name = "local"
    pool: ClassVar[_Pool] = _Pool()

    def start_job(self) -> None:
        self.job_id = self.pool.submit(self)
        self.pool.update()

    def get_job_status(self) -> JobStatus:
        return self.pool.status(self)

    def kill_job(self) -> None:
        self.pool.kill([self])

    def attach(self, submission: dict[str, Any]) -> bool:
        """Follow the job of a steering process that was killed: its wrapper runs on in a session of its
        own. Jobs that were still waiting for a slot were lost with that process, and are started again."""
        if submission.get("host") != socket.gethostname():
            return False
        process = self.pool.wrapper_process(self.job_files.wrapper)
        if process is None:
            return False
        self.job_id = str(submission.get("job_id"))
        self.pool.adopt(self.job_id, process, self.job_files.exit_code)
        return True

    @classmethod
    def kill_jobs(cls, jobs: list[BatchProcess]) -> None:
        cls.pool.kill([job for job in jobs if isinstance(job, LocalProcess)])
