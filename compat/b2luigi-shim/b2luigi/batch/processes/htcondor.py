"""``b2luigi.batch.processes.htcondor``: ``HTCondorProcess``, ``HTCondorJobStatus``, ``HTCondorJobStatusCache``.

As ``batch_system`` (``"htcondor"`` or the class) a task's jobs are b2batch's HTCondor jobs
(:class:`b2batch.systems.htcondor.HTCondorSystem`, its settings: see ``b2batch settings``). The class also has
b2luigi's process API for code that drives it itself: ``start_job`` writes b2luigi's ``job.submit`` (one
``queue 1`` block per member of a grouped task) and runs ``condor_submit``, ``get_job_status`` asks the
module's status cache (``condor_q``, then ``condor_history``), ``terminate_job`` runs one ``condor_rm``. A
setting whose name is no submit command name, or whose value holds a line break, is refused.
"""

from __future__ import annotations

import enum
import json
import logging
import os
import re
import subprocess
import time
from itertools import chain
from typing import Any

from luigi.scheduler import DONE

from b2luigi.batch.cache import BatchJobStatusCache
from b2luigi.batch.helpers import one_line, option_name, retried, wrapper_for
from b2luigi.batch.processes import (BatchProcess, JobStatus, aggregate_job_status, expand_grouped_task,
                                                    status_of)
from b2luigi.core.settings import get_setting
from b2luigi.core.utils import get_log_file_dir, get_task_file_dir

__all__ = ["HTCondorJobStatus", "HTCondorJobStatusCache", "HTCondorProcess"]

logger = logging.getLogger(__name__)

_NO_LOG = "<No user log>"


class HTCondorJobStatus(enum.IntEnum):
    """HTCondor's ``JobStatus`` codes (job ClassAd attributes), and ``failed`` for a job that exited non-zero."""

    idle = 1
    running = 2
    removed = 3
    completed = 4
    held = 5
    transferring_output = 6
    suspended = 7
    failed = 999


def _history_command(job_ids: list[str]) -> list[str]:
    return ["condor_history", "-json", "-attributes", "ClusterId,JobStatus,ExitCode,UserLog", "-match",
            str(len(job_ids)), *job_ids]


class HTCondorJobStatusCache(BatchJobStatusCache):
    """Job states ``(status, user log)`` by cluster id, from ``condor_q``; ended jobs from ``condor_history``."""

    @retried
    def _ask_for_job_status(self, job_id: Any = None) -> None:
        command = ["condor_q", "-json", "-attributes", "ClusterId,JobStatus,ExitStatus,ExitCode,UserLog"]
        seen = self._fill_from_output(subprocess.check_output(command + ([str(job_id)] if job_id else [])))
        if job_id and job_id not in seen:
            for attempt in range(5):  # a job may take a while to show up in the history
                if self._fill_from_output(subprocess.check_output(_history_command([str(job_id)]))):
                    break
                logger.debug("Could not find status of job %s! Trying again.", job_id)
                time.sleep((attempt + 1) * 2)
        elif not job_id:
            missing = [str(one) for one in chain.from_iterable(self._job_ids) if one not in seen and one not in self]
            if missing:
                self._fill_from_output(subprocess.check_output(_history_command(missing)))

    def _fill_from_output(self, output: bytes) -> set[Any]:
        """Store the states of condor_q's or condor_history's JSON answer; the cluster ids seen."""
        text = output.decode()
        seen: set[Any] = set()
        for ad in json.loads(text) if text else []:
            exit_code = ad.get("ExitCode", ad.get("ExitStatus", 1))
            status = ad["JobStatus"]
            if status == HTCondorJobStatus.completed and exit_code:
                status = HTCondorJobStatus.failed
            self[ad["ClusterId"]] = (status, ad.get("UserLog", _NO_LOG))
            seen.add(ad["ClusterId"])
        return seen


_batch_job_status_cache = HTCondorJobStatusCache()

_SUCCESSFUL = {HTCondorJobStatus.completed}
_RUNNING = {HTCondorJobStatus.idle, HTCondorJobStatus.running, HTCondorJobStatus.transferring_output,
            HTCondorJobStatus.suspended}
_ABORTED = {HTCondorJobStatus.removed, HTCondorJobStatus.held, HTCondorJobStatus.failed}


class HTCondorProcess(BatchProcess):
    """b2luigi's HTCondor batch process; as ``batch_system``, b2batch's HTCondor system."""

    name = system_name = engine_system = "htcondor"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._batch_job_ids: list[int] = []

    @staticmethod
    def get_job_status_for_id(job_id: Any) -> JobStatus:
        if not job_id:
            return JobStatus.aborted
        try:
            state, _ = _batch_job_status_cache[job_id]
        except KeyError:
            return JobStatus.aborted
        return status_of(state, _SUCCESSFUL, _RUNNING, _ABORTED, "HTCondor")

    def get_job_status(self) -> JobStatus:
        """The status of all the task's jobs together; once they ended, a ``failed_jobs.log`` names the failed
        ones with their user logs."""
        statuses = [self.get_job_status_for_id(job_id=job_id) for job_id in self._batch_job_ids]
        status = aggregate_job_status(statuses)
        if status == JobStatus.running:
            return status
        if status == JobStatus.aborted:
            folder = get_log_file_dir(task=self.task)
            os.makedirs(folder, exist_ok=True)
            with open(os.path.join(folder, "failed_jobs.log"), "w") as log:
                for job_id, one in zip(self._batch_job_ids, statuses):
                    if one == JobStatus.aborted:
                        log.write(f"{job_id}: {_batch_job_status_cache.get(job_id, (None, _NO_LOG))[1]}\n")
        if self._batch_job_ids in _batch_job_status_cache._job_ids:
            _batch_job_status_cache.remove_job_ids(job_ids=self._batch_job_ids)
        return status

    def start_job(self) -> None:
        """``condor_submit`` the task's ``job.submit`` (nothing when every member is complete already)."""
        submit_file = self._create_htcondor_submit_file()
        if self._terminated:
            return
        folder, name = os.path.split(submit_file)
        output = subprocess.check_output(["condor_submit", name], cwd=folder).decode()
        found = re.findall(r"[0-9]+\.", output)
        if not found:
            raise RuntimeError("Batch submission failed with output " + output)
        new_ids = [int(one[:-1]) for one in found]
        self._batch_job_ids.extend(new_ids)
        _batch_job_status_cache.add_job_ids(self._batch_job_ids)
        _batch_job_status_cache.seed_submitted(new_ids, (HTCondorJobStatus.idle, _NO_LOG))

    def terminate_job(self) -> None:
        if self._batch_job_ids:
            subprocess.run(["condor_rm", *map(str, self._batch_job_ids)], stdout=subprocess.DEVNULL)

    @staticmethod
    def _create_submit_file_content(task: Any) -> list[str]:
        """The lines of one job's block: output, error, log, executable, ``htcondor_settings`` (the global ones,
        then the task's), those of ``transfer_files`` and ``job_name`` (unless set as ``JobBatchName``), then
        ``queue 1``."""
        folder = get_log_file_dir(task)
        os.makedirs(folder, exist_ok=True)
        lines = [f"{key} = {one_line(os.path.abspath(os.path.join(folder, name)), key)}"
                 for key, name in (("output", "stdout"), ("error", "stderr"), ("log", "job.log"))]
        lines.append(f"executable = {one_line(os.path.abspath(wrapper_for(task)), 'executable')}")
        settings = dict(get_setting("htcondor_settings", default={}) or {})
        settings.update(get_setting("htcondor_settings", task=task, default={}) or {})
        transfer_files = get_setting("transfer_files", task=task, default=[])
        if transfer_files:
            if get_setting("working_dir", task=task, default="") != ".":
                raise ValueError("If using transfer_files, the working_dir must be explicitly set to '.'")
            settings.setdefault("should_transfer_files", "YES")
            settings.setdefault("when_to_transfer_output", "ON_EXIT")
            files = set(transfer_files)
            for path in files:
                if os.path.abspath(path) != path:
                    raise ValueError("You should only give absolute file names in transfer_files!"
                                     f"{os.path.abspath(path)} != {path}")
            env_script = get_setting("env_script", task=task, default="")
            if env_script:
                files.add(os.path.abspath(env_script))
            settings.setdefault("transfer_input_files", ",".join(files))
        job_name = get_setting("job_name", task=task, default=False)
        if job_name is not False:
            settings.setdefault("JobBatchName", job_name)
        for key, value in settings.items():
            name = option_name(key, "htcondor_settings")
            lines.append(f"{name} = {one_line(value, f'htcondor_settings[{name!r}]')}")
        lines.append("queue 1")
        return lines

    def _create_htcondor_submit_file(self) -> str:
        """Write ``job.submit`` into the task's task file folder, a block per member of the task not complete
        yet; with none left the task is done at once. Its path."""
        folder = get_task_file_dir(task=self.task)
        os.makedirs(folder, exist_ok=True)
        lines: list[str] = []
        for member in expand_grouped_task(self.task):
            lines += self._create_submit_file_content(task=member)
        if not lines:
            self._put_to_result_queue(status=DONE, explanation="")
            self._terminated = True
        path = os.path.join(folder, "job.submit")
        with open(path, "w") as submit_file:
            submit_file.write("\n".join(lines))
        return path
