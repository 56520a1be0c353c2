"""``b2luigi.batch.processes.test``: ``TestProcess``, the ``test`` batch system of b2luigi's test scripts.

As ``batch_system`` (``"test"`` or the class) each task runs as a background process of this machine with its
output in the task's log files (b2batch's ``test`` system, its ``local`` system under b2luigi's name). The class
also has b2luigi's process API for code that drives it itself: ``start_job`` runs the task's executable wrapper
as a child process, ``get_job_status`` reads its exit code, ``terminate_job`` kills it.
"""

from __future__ import annotations

import os
import subprocess
from typing import Any

from b2luigi.batch.helpers import wrapper_for
from b2luigi.batch.processes import BatchProcess, JobStatus
from b2luigi.core.utils import get_log_file_dir

__all__ = ["TestProcess"]


class TestProcess(BatchProcess):
    """b2luigi's test batch process; as ``batch_system``, b2batch's ``test`` system."""

    __test__ = False  # not a pytest test class
    name = system_name = engine_system = "test"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._process: subprocess.Popen[bytes] | None = None

    def get_job_status(self) -> JobStatus:
        if not self._process:
            return JobStatus.aborted
        code = self._process.poll()
        if code is None:
            return JobStatus.running
        return JobStatus.aborted if code else JobStatus.successful

    def start_job(self) -> None:
        folder = get_log_file_dir(self.task)
        os.makedirs(folder, exist_ok=True)
        wrapper = wrapper_for(self.task)
        with open(os.path.join(folder, "stdout"), "w") as stdout, open(os.path.join(folder, "stderr"), "w") as stderr:
            self._process = subprocess.Popen([wrapper], stdout=stdout, stderr=stderr)

    def terminate_job(self) -> None:
        if self._process:
            self._process.kill()

    def get_job_output(self) -> str:
        return ""
