"""The ``local`` batch system: jobs are background processes of this machine, a limited number at once.

It runs the same wrapper as every other batch system, so the whole batch path runs and is tested anywhere.
"""

from __future__ import annotations

import collections
import logging
import os
import signal
import subprocess
import threading
import time
from typing import ClassVar

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
            if not self.waiting:
                return
            slots = self.slots()
            while self.waiting and len(self.running) < slots:
                job_id, job = self.waiting.popitem(last=False)
                self.running[job_id] = subprocess.Popen(
                    [str(job.job_files.wrapper)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL, start_new_session=True,
                )

    def status(self, job: LocalProcess) -> JobStatus:
        self.update()
        job_id = str(job.job_id)
        if job_id in self.running:
            return JobStatus.running
        if job_id in self.ended:
            return JobStatus.successful if self.ended[job_id] == 0 else JobStatus.aborted
        return JobStatus.idle if job_id in self.waiting else JobStatus.aborted

    def kill(self, jobs: list[LocalProcess], grace: float = KILL_GRACE) -> None:
        """SIGTERM to each job's process group; SIGKILL to those still there after ``grace`` seconds."""
        signalled = []
        with self.lock:
            for job in jobs:
                job_id = str(job.job_id)
                if self.waiting.pop(job_id, None) is not None:
                    self.ended[job_id] = -signal.SIGTERM
                elif job_id in self.running:
                    signalled.append(self.running[job_id])
        for popen in signalled:
            _signal_group(popen, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for popen in signalled:
            try:
                popen.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                logger.warning("Local job (pid %d) did not end %g s after SIGTERM: sending SIGKILL", popen.pid,
                               grace)
                _signal_group(popen, signal.SIGKILL)
                popen.wait()
        self.update(force=True)


def _signal_group(popen: subprocess.Popen[bytes], signum: int) -> None:
    try:
        os.killpg(popen.pid, signum)
    except ProcessLookupError:
        pass


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

    @classmethod
    def kill_jobs(cls, jobs: list[BatchProcess]) -> None:
        cls.pool.kill([job for job in jobs if isinstance(job, LocalProcess)])
