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
from typing import ClassVar

from b2batch.process import BatchProcess, JobStatus
from b2batch.settings import get_setting

logger = logging.getLogger(__name__)


class _Pool:
    """Starts waiting jobs when a slot is free; shared by all local jobs of the steering process."""

    def __init__(self) -> None:
        self.waiting: collections.deque[LocalProcess] = collections.deque()
        self.running: dict[str, subprocess.Popen[bytes]] = {}
        self.ended: dict[str, int] = {}
        self.lock = threading.Lock()
        self.counter = 0

    def slots(self) -> int:
        value = get_setting("local_slots")
        return int(value) if value else (os.cpu_count() or 1)

    def submit(self, job: LocalProcess) -> str:
        with self.lock:
            self.counter += 1
            job_id = f"{os.getpid()}.{self.counter}"
            self.waiting.append(job)
        return job_id

    def update(self) -> None:
        with self.lock:
            for job_id, popen in list(self.running.items()):
                code = popen.poll()
                if code is not None:
                    self.ended[job_id] = code
                    del self.running[job_id]
            while self.waiting and len(self.running) < self.slots():
                job = self.waiting.popleft()
                assert job.job_id is not None
                self.running[job.job_id] = subprocess.Popen(
                    [str(job.job_files.wrapper)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL, start_new_session=True,
                )

    def status(self, job: LocalProcess) -> JobStatus:
        self.update()
        if job.job_id in self.running:
            return JobStatus.running
        if job.job_id in self.ended:
            return JobStatus.successful if self.ended[job.job_id] == 0 else JobStatus.aborted
        return JobStatus.idle if job in self.waiting else JobStatus.aborted

    def kill(self, job: LocalProcess) -> None:
        with self.lock:
            if job in self.waiting:
                self.waiting.remove(job)
                self.ended[str(job.job_id)] = -signal.SIGTERM
                return
            popen = self.running.get(str(job.job_id))
        if popen is not None:
            try:
                os.killpg(popen.pid, signal.SIGTERM)
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
        self.pool.kill(self)
