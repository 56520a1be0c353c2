"""``b2luigi.batch.processes.lsf``: ``LSFProcess`` and ``LSFJobStatusCache``.

As ``batch_system`` (``"lsf"`` or the class) a task's jobs are b2batch's LSF jobs
(:class:`b2batch.systems.lsf.LSFSystem`, its settings: see ``b2batch settings``). The class also has b2luigi's
process API for code that drives it itself: ``start_job`` runs b2luigi's ``bsub`` (``queue``, ``job_slots``,
``job_name``, the log files and the executable wrapper, as an argument list: no shell) per member of a grouped
task, ``get_job_status`` asks the module's status cache (``bjobs -json``), ``terminate_job`` runs one ``bkill``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from typing import Any

from luigi.scheduler import DONE

from b2luigi.batch.cache import BatchJobStatusCache
from b2luigi.batch.helpers import retried, wrapper_for
from b2luigi.batch.processes import JobStatus, MemberJobsProcess, expand_grouped_task
from b2luigi.core.settings import get_setting
from b2luigi.core.utils import get_log_file_dir

__all__ = ["LSFJobStatusCache", "LSFProcess"]


class LSFJobStatusCache(BatchJobStatusCache):
    """Job states (LSF's ``STAT``: ``PEND``, ``RUN``, ``DONE``, ``EXIT``, ...) by job id, from ``bjobs -json``."""

    @retried
    def _ask_for_job_status(self, job_id: Any = None) -> None:
        command = ["bjobs", "-json", "-o", "jobid stat"] + ([str(job_id)] if job_id else [])
        for record in json.loads(subprocess.check_output(command).decode())["RECORDS"]:
            self[record["JOBID"]] = record["STAT"]


_batch_job_status_cache = LSFJobStatusCache()


class LSFProcess(MemberJobsProcess):
    """b2luigi's LSF batch process; as ``batch_system``, b2batch's LSF system."""

    name = system_name = engine_system = "lsf"

    @staticmethod
    def _get_job_status_for_id(job_id: str) -> JobStatus:
        try:
            state = _batch_job_status_cache[job_id]
        except KeyError:
            return JobStatus.aborted
        return {"DONE": JobStatus.successful, "EXIT": JobStatus.aborted}.get(state, JobStatus.running)

    def start_job(self) -> None:
        """One ``bsub`` per member of the task not complete yet (a plain task is its own member); with none
        left the task is done at once."""
        members = expand_grouped_task(self.task)
        if not members:
            self._put_to_result_queue(status=DONE, explanation="")
            self._terminated = True
            return
        for member in members:
            job_id = self._submit_task(member)
            self._batch_job_ids.append(job_id)
            _batch_job_status_cache.seed_submitted([job_id], "PEND")
            self._job_log_dirs[job_id] = get_log_file_dir(member)

    @staticmethod
    def _submit_task(task: Any) -> str:
        """``bsub`` the task's executable wrapper; its LSF job id."""
        command = ["bsub", "-env all"]
        for option, setting in (("-q", "queue"), ("-n", "job_slots"), ("-J", "job_name")):
            value = get_setting(setting, task=task, default=False)
            if value is not False:
                command += [option, str(value)]
        folder = get_log_file_dir(task)
        os.makedirs(folder, exist_ok=True)
        command += ["-eo", os.path.join(folder, "stderr"), "-oo", os.path.join(folder, "stdout"), wrapper_for(task)]
        output = subprocess.check_output(command).decode()
        found = re.search(r"<[0-9]+>", output)
        if not found:
            raise RuntimeError("Batch submission failed with output " + output)
        return found.group(0)[1:-1]

    def terminate_job(self) -> None:
        if self._batch_job_ids:
            subprocess.run(["bkill", *self._batch_job_ids], stdout=subprocess.DEVNULL, check=False)
