"""``b2luigi.batch.processes.apptainer``: ``ApptainerProcess``.

As ``batch_system`` (``"apptainer"`` or the class) a task's jobs are b2batch's ``apptainer`` jobs: local jobs in
the container of ``apptainer_image`` (with ``apptainer_mounts``, ``apptainer_mount_defaults``,
``apptainer_additional_params`` and ``apptainer_cmd``; docs/containers.md). The class also has b2luigi's process
API for code that drives it itself: ``start_job`` runs b2luigi's command of the task
(``core.utils.create_cmd_from_task``) in the container (``core.utils.create_apptainer_command``, an argument
list whose shell payload quotes every value) as a child process, whose output goes to the task's log files
when it ended.
"""

from __future__ import annotations

import os
import subprocess
from typing import Any

from b2luigi.batch.processes import BatchProcess, JobStatus
from b2luigi.core import utils
from b2luigi.core.utils import get_log_file_dir

__all__ = ["ApptainerProcess"]


class ApptainerProcess(BatchProcess):
    """b2luigi's process for a task in an Apptainer container; as ``batch_system``, b2batch's apptainer system."""

    name = system_name = engine_system = "apptainer"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._process: subprocess.Popen[bytes] | None = None
        self._stdout: bytes | None = None
        self._stderr: bytes | None = None

    def get_job_status(self) -> JobStatus:
        if self._process is None:
            return JobStatus.aborted
        if self._process.poll() is None:
            return JobStatus.running
        self._stdout, self._stderr = self._process.communicate()
        self._write_output()
        return JobStatus.successful if self._process.returncode == 0 else JobStatus.aborted

    def start_job(self) -> None:
        command = " ".join(utils.create_cmd_from_task(self.task))
        self._process = subprocess.Popen(utils.create_apptainer_command(command, task=self.task),
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def terminate_job(self) -> None:
        if self._process is not None:
            self._process.terminate()

    def _write_output(self) -> None:
        """Write the process's stdout and stderr into the task's log files ``stdout`` and ``stderr``."""
        folder = get_log_file_dir(self.task)
        for name, data in (("stdout", self._stdout), ("stderr", self._stderr)):
            with open(os.path.join(folder, name), "w") as log:
                if data is not None:
                    log.write(data.decode())
