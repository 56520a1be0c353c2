"""``b2luigi.batch.processes.slurm``: ``SlurmProcess``, ``SlurmJobStatus``, ``SlurmJobStatusCache``.

As ``batch_system`` (``"slurm"`` or the class) a task's jobs are b2batch's Slurm jobs
(:class:`b2batch.systems.slurm.SlurmSystem`). The class also has b2luigi's process API for code that drives it
itself: ``start_job`` writes b2luigi's ``slurm_parameters.sh`` per (grouped) task and submits it with
``sbatch``, ``get_job_status`` asks the module's status cache (``squeue``, then ``sacct`` or ``scontrol``),
``terminate_job`` runs one ``scancel``. Every value from the settings in the script is shell-quoted, and one
holding a line break is refused.
"""

from __future__ import annotations

import enum
import getpass
import pathlib
import re
import shlex
import subprocess
from typing import Any

from luigi.scheduler import DONE

from b2luigi.batch.cache import BatchJobStatusCache
from b2luigi.batch.helpers import one_line, option_name, retried, wrapper_for
from b2luigi.batch.processes import JobStatus, MemberJobsProcess, expand_grouped_task, status_of
from b2luigi.core.settings import get_setting
from b2luigi.core.utils import get_log_file_dir, get_task_file_dir

__all__ = ["SlurmJobStatus", "SlurmJobStatusCache", "SlurmProcess"]


class SlurmJobStatus(enum.StrEnum):
    """Slurm's job states (https://slurm.schedmd.com/job_state_codes.html) that b2luigi knows."""

    completed = "COMPLETED"
    pending = "PENDING"
    running = "RUNNING"
    suspended = "SUSPENDED"
    preempted = "PREEMPTED"
    completing = "COMPLETING"
    configuring = "CONFIGURING"
    boot_fail = "BOOT_FAIL"
    cancelled = "CANCELLED"
    deadline = "DEADLINE"
    node_fail = "NODE_FAIL"
    out_of_memory = "OUT_OF_MEMORY"
    failed = "FAILED"
    timeout = "TIMEOUT"


_SUCCESSFUL = {SlurmJobStatus.completed}
_RUNNING = {SlurmJobStatus.pending, SlurmJobStatus.running, SlurmJobStatus.suspended, SlurmJobStatus.preempted,
            SlurmJobStatus.completing, SlurmJobStatus.configuring}
_ABORTED = {SlurmJobStatus.boot_fail, SlurmJobStatus.cancelled, SlurmJobStatus.deadline, SlurmJobStatus.node_fail,
            SlurmJobStatus.out_of_memory, SlurmJobStatus.failed, SlurmJobStatus.timeout}


class SlurmJobStatusCache(BatchJobStatusCache):
    """Job states from ``squeue``; a job no longer there from ``sacct``, or ``scontrol`` where accounting is
    off; a job none of them knows is failed."""

    sacct_disabled: bool | None = None

    @retried
    def _ask_for_job_status(self, job_id: Any = None) -> None:
        user = getpass.getuser()
        command = ["squeue", "--noheader", "--user", user, "--format", "'%i %T'"]
        if job_id:
            command += ["--job", str(job_id)]
        try:
            output = subprocess.check_output(command, stderr=subprocess.PIPE)
        except subprocess.CalledProcessError as e:
            if not (job_id and e.stderr and b"Invalid job id specified" in e.stderr):
                raise
            output = b""  # a job already purged from squeue's table: sacct or scontrol knows its end
        seen = self._fill_from_output(output.decode())
        if not job_id or job_id in seen:
            return
        if not self._check_if_sacct_is_disabled_on_server():
            history = ["sacct", "--noheader", "-X", "--user", user, "--format=JobID,State", "--job", str(job_id)]
            self._fill_from_output(subprocess.check_output(history).decode())
        else:
            shown = subprocess.check_output(["scontrol", "show", "job", str(job_id)]).decode()
            found = re.search(r"JobState=([A-Z_]+)", shown)
            if found:
                self[job_id] = self._get_SlurmJobStatus_from_string(found.group(1))

    def _fill_from_output(self, output: str) -> set[int]:
        """Store the states of lines ``<job id> <state>`` (quoted or not); the ids seen."""
        seen: set[int] = set()
        for line in output.split("\n"):
            if not line:
                continue
            fields = line.strip().strip("'").split()
            assert len(fields) == 2, ("Unexpected behaviour has occurred whilst retrieving job information. There "
                                      "may be an issue with the sqeue, sacct or scontrol commands.")
            job_id = int(fields[0])
            self[job_id] = self._get_SlurmJobStatus_from_string(fields[1].strip("+"))  # "CANCELLED+"
            seen.add(job_id)
        return seen

    def _get_SlurmJobStatus_from_string(self, state_string: str) -> SlurmJobStatus:
        try:
            return SlurmJobStatus(state_string)
        except ValueError:
            raise KeyError(f"The state {state_string} could not be found in the SlurmJobStatus states") from None

    def _check_if_sacct_is_disabled_on_server(self) -> bool:
        """Whether ``sacct`` answers that accounting is disabled (asked once)."""
        if self.sacct_disabled is None:
            answer = subprocess.run(["sacct"], capture_output=True)
            self.sacct_disabled = (answer.returncode == 1 and answer.stderr.strip().decode()
                                   == "Slurm accounting storage is disabled")
        return self.sacct_disabled


_batch_job_status_cache = SlurmJobStatusCache()


class SlurmProcess(MemberJobsProcess):
    """b2luigi's Slurm batch process; as ``batch_system``, b2batch's Slurm system."""

    name = system_name = engine_system = "slurm"

    @staticmethod
    def _get_job_status_for_id(job_id: int) -> JobStatus:
        try:
            state = _batch_job_status_cache[job_id]
        except KeyError:
            return JobStatus.aborted
        return status_of(state, _SUCCESSFUL, _RUNNING, _ABORTED, "Slurm")

    def start_job(self) -> None:
        """``sbatch`` a ``slurm_parameters.sh`` for each member of the task not complete yet (a plain task is
        its own member); with none left the task is done at once."""
        members = expand_grouped_task(self.task)
        if not members:
            self._put_to_result_queue(status=DONE, explanation="")
            self._terminated = True
            return
        for member in members:
            script = pathlib.Path(self._create_slurm_submit_file(member))
            output = subprocess.check_output(["sbatch", script.name], cwd=script.parent).decode()
            found = re.search(r"[0-9]+", output)
            if not found:
                raise RuntimeError("Batch submission failed with output " + output)
            job_id = int(found.group(0))
            self._batch_job_ids.append(job_id)
            _batch_job_status_cache.seed_submitted([job_id], SlurmJobStatus.pending)
            self._job_log_dirs[job_id] = get_log_file_dir(member)

    def terminate_job(self) -> None:
        if self._batch_job_ids:
            subprocess.run(["scancel", *map(str, self._batch_job_ids)], stdout=subprocess.DEVNULL)

    def _create_slurm_submit_file(self, task: Any = None) -> pathlib.Path:
        """Write ``slurm_parameters.sh`` into the task's task file folder: ``#SBATCH`` lines for the log files,
        ``slurm_settings`` (the global ones, then the task's) and ``job_name`` (unless ``job-name`` is set),
        then ``exec`` of the executable wrapper; its path."""
        task = self.task if task is None else task
        log_folder = pathlib.Path(get_log_file_dir(task))
        log_folder.mkdir(parents=True, exist_ok=True)
        options = {"output": (log_folder / "stdout").resolve(), "error": (log_folder / "stderr").resolve()}
        settings = dict(get_setting("slurm_settings", default={}) or {})
        settings.update(get_setting("slurm_settings", task=task, default={}) or {})
        job_name = get_setting("job_name", task=task, default=False)
        if job_name is not False:
            settings.setdefault("job-name", job_name)
        lines = ["#!/usr/bin/bash"]
        for key, value in [*options.items(), *settings.items()]:
            name = option_name(key, "slurm_settings")
            lines.append(f"#SBATCH --{name}={shlex.quote(one_line(value, f'slurm_settings[{name!r}]'))}")
        wrapper = pathlib.Path(wrapper_for(task)).resolve()
        lines.append(f"exec {shlex.quote(one_line(wrapper, 'The executable wrapper path'))}")
        folder = pathlib.Path(get_task_file_dir(task))
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "slurm_parameters.sh"
        path.write_text("\n".join(lines))
        return path
