"""Slurm: ``sbatch --parsable`` to submit, one ``squeue`` per poll for all jobs, ``scancel`` to kill.

States: https://slurm.schedmd.com/squeue.html#SECTION_JOB-STATE-CODES
"""

from __future__ import annotations

import difflib
import logging
import re
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar


from b2batch.engine import Job, JobState, JobStatus, NativeState, causes
from b2batch.engine.escalation import Request, megabytes, seconds
from b2batch.errors import B2BatchError, SettingError
from b2batch.systems import command_runner
from b2batch.systems.scheduler import SchedulerSystem
from b2batch.systems.job_settings import WRAPPER_SETTINGS

logger = logging.getLogger(__name__)

#: sbatch's long options a task may set in ``slurm_settings``.
SBATCH_OPTIONS = frozenset("""
account acctg-freq batch bb bbf begin cluster-constraint clusters comment constraint container contiguous
core-spec cores-per-socket cpu-freq cpus-per-gpu cpus-per-task deadline delay-boot dependency distribution
exclude exclusive export export-file extra-node-info get-user-env gid gpu-bind gpu-freq gpus gpus-per-node
gpus-per-socket gpus-per-task gres gres-flags hint hold ignore-pbs kill-on-invalid-dep licenses mail-type
mail-user mcs-label mem mem-bind mem-per-cpu mem-per-gpu mincpus network nice no-kill no-requeue nodefile
nodelist nodes ntasks ntasks-per-core ntasks-per-gpu ntasks-per-node ntasks-per-socket open-mode overcommit
oversubscribe partition power prefer priority profile propagate qos reboot requeue reservation signal
sockets-per-node spread-job switches thread-spec threads-per-core time time-min tmp uid use-min-nodes wckey
""".split())

#: Short options and their long names.
SBATCH_SHORT = {"A": "account", "b": "begin", "c": "cpus-per-task", "C": "constraint", "d": "dependency",
                "G": "gpus", "H": "hold", "L": "licenses", "M": "clusters", "N": "nodes", "n": "ntasks",
                "p": "partition", "q": "qos", "s": "oversubscribe", "t": "time", "w": "nodelist",
                "x": "exclude"}

#: Options b2batch sets itself.
SBATCH_RESERVED = frozenset({"array", "chdir", "error", "input", "job-name", "output", "parsable", "wait",
                             "wrap", "test-only"})


def sbatch_options(settings: Any, task: Any) -> list[str]:
    """``slurm_settings`` as sbatch arguments, each option checked; an unknown one is a SettingError."""
    if not isinstance(settings, dict):
        raise SettingError(f"Task {task}: the setting 'slurm_settings' must be a dict of sbatch options, "
                           f"e.g. {{\"cpus-per-task\": 2, \"mem\": \"2G\"}}, not {settings!r}.")
    arguments = []
    for key, value in settings.items():
        name = SBATCH_SHORT.get(str(key).lstrip("-"), str(key).lstrip("-").replace("_", "-"))
        if name in SBATCH_RESERVED:
            raise SettingError(f"Task {task}: slurm_settings sets {key!r}, which b2batch sets itself; remove it "
                               f"(use the setting job_name for the job's name, log_dir for logs).")
        if name not in SBATCH_OPTIONS:
            close = difflib.get_close_matches(name, SBATCH_OPTIONS, n=3)
            hint = f" Did you mean {', '.join(close)}?" if close else ""
            raise SettingError(f"Task {task}: {key!r} in slurm_settings is not an sbatch option b2batch knows."
                               f"{hint} Use sbatch's long option names without dashes, e.g. \"cpus-per-task\".")
        if value is False or value is None:
            continue
        if value is True:
            arguments.append(f"--{name}")
        elif isinstance(value, (str, int, float)) and "\n" not in str(value):
            arguments.append(f"--{name}={value}")
        else:
            raise SettingError(f"Task {task}: slurm_settings[{key!r}] must be a string, number or true, not "
                               f"{value!r}.")
    return arguments


#: What slurmstepd writes into the job's log when it kills a job over its --mem.
_MEMORY_KILL = re.compile(r"exceeded (job )?memory limit|oom-kill", re.I)
#: Why Slurm ended a job, by final state.
_CAUSES = {"OUT_OF_MEMORY": causes.MEMORY, "TIMEOUT": causes.TIME, "DEADLINE": causes.TIME,
           "NODE_FAIL": causes.NODE, "BOOT_FAIL": causes.NODE}


def slurm_seconds(value: Any) -> float | None:
    """Seconds of an sbatch ``--time`` value (minutes, MM:SS, HH:MM:SS, D-HH[:MM[:SS]]); None if unreadable."""
    if value in (None, False, True, "") or str(value).strip().upper() in ("INFINITE", "UNLIMITED"):
        return None
    text = str(value).strip()
    try:
        return float(int(text) * 60) if text.isdigit() else seconds(text)
    except ValueError:
        return None


def slurm_time(value: float) -> str:
    """An sbatch ``--time`` value: ``HH:MM:SS``."""
    value = int(value)
    return f"{value // 3600:02d}:{value % 3600 // 60:02d}:{value % 60:02d}"


def _healed(settings: dict[str, Any], escalated: Request | None, excluded: tuple[str, ...]) -> dict[str, Any]:
    """``slurm_settings`` with the escalated ``--mem``/``--time`` and the excluded nodes in ``--exclude``."""
    healed: dict[str, Any] = {}
    user_excluded = ""
    for key, value in settings.items():
        name = SBATCH_SHORT.get(str(key).lstrip("-"), str(key).lstrip("-").replace("_", "-"))
        if escalated is not None and ((name == "mem" and escalated.memory_mb is not None)
                                      or (name == "time" and escalated.time_s is not None)):
            continue
        if name == "exclude" and excluded:
            user_excluded = str(value) if value not in (None, False, True) else ""
            continue
        healed[key] = value
    if escalated is not None and escalated.memory_mb is not None:
        healed["mem"] = f"{int(escalated.memory_mb)}M"
    if escalated is not None and escalated.time_s is not None:
        healed["time"] = slurm_time(escalated.time_s)
    if excluded:
        healed["exclude"] = ",".join([*filter(None, user_excluded.split(",")), *excluded])
    return healed




class SlurmSystem(SchedulerSystem):
    """Slurm in one run."""

    name = "slurm"
    job_settings = (*WRAPPER_SETTINGS, "slurm_settings")
    #: ``sbatch --parsable`` prints ``<id>`` or ``<id>;<cluster>``.
    job_id_formats: ClassVar[tuple[str, ...]] = ("{id:d};{cluster}", "{id:d}")
    state_map: ClassVar[dict[str, JobStatus]] = {
        "PENDING": JobStatus.idle,
        "CONFIGURING": JobStatus.idle,
        "REQUEUED": JobStatus.idle,
        "REQUEUE_FED": JobStatus.idle,
        "REQUEUE_HOLD": JobStatus.idle,
        "RESV_DEL_HOLD": JobStatus.idle,
        "SPECIAL_EXIT": JobStatus.idle,
        "RUNNING": JobStatus.running,
        "COMPLETING": JobStatus.running,
        "RESIZING": JobStatus.running,
        "SIGNALING": JobStatus.running,
        "STAGE_OUT": JobStatus.running,
        "STOPPED": JobStatus.running,
        "SUSPENDED": JobStatus.running,
        "COMPLETED": JobStatus.successful,
        "BOOT_FAIL": JobStatus.aborted,
        "CANCELLED": JobStatus.aborted,
        "DEADLINE": JobStatus.aborted,
        "FAILED": JobStatus.aborted,
        "NODE_FAIL": JobStatus.aborted,
        "OUT_OF_MEMORY": JobStatus.aborted,
        "PREEMPTED": JobStatus.aborted,
        "REVOKED": JobStatus.aborted,
        "TIMEOUT": JobStatus.aborted,
    }

    scheduler_side_states: ClassVar[frozenset[str]] = frozenset({"NODE_FAIL", "PREEMPTED", "BOOT_FAIL"})

    array_index: ClassVar[str | None] = "${SLURM_ARRAY_TASK_ID}"
    lists_all_jobs: ClassVar[bool] = True
    #: slurmdbd has a job's record a fraction of a second after slurmctld ended it.
    accounting_lag: ClassVar[float] = 0.25

    def common_options(self, job: Job) -> list[str]:
        settings = job.config["slurm_settings"] or {}
        escalated, excluded = self.escalated(job), self.excluded_nodes()
        if isinstance(settings, dict) and (escalated or excluded):
            settings = _healed(settings, escalated, excluded)
        return sbatch_options(settings, job)

    def avoid_nodes(self, nodes: tuple[str, ...]) -> None:
        """The run excluded ``nodes``: jobs of it still pending in the queue (submitted before, array elements
        among them) avoid them too, with one ``scontrol update ... ExcNodeList=`` per distinct list (the task's
        own ``exclude`` kept); without it they would still start there, and fail. A job that started meanwhile
        is not changed (scontrol refuses it; that is no error)."""
        by_list: dict[str, set[str]] = {}
        for job_id, job in list(self._by_id.items()):
            native = self.monitor.states.get(job_id)
            if native is None or native.state != "PENDING":
                continue
            settings = job.config["slurm_settings"] or {}
            excluded = _healed(settings if isinstance(settings, dict) else {}, None, nodes)["exclude"]
            by_list.setdefault(excluded, set()).add(job_id.split("_", 1)[0])  # an array: all its pending elements
        for excluded, ids in by_list.items():
            ordered = sorted(ids)
            for start in range(0, len(ordered), 500):
                command = ["scontrol", "update", f"JobId={','.join(ordered[start:start + 500])}",
                           f"ExcNodeList={excluded}"]
                try:
                    command_runner.run(command, timeout=self.call_timeout, calls=self.calls)
                except B2BatchError as e:  # e.g. some of them started meanwhile
                    logger.info("Pending Slurm jobs not all moved off %s: %s", ",".join(nodes), e)

    def requested(self, job: Job) -> Request:
        settings = job.config["slurm_settings"] or {}
        if not isinstance(settings, dict):
            return Request()
        named = {SBATCH_SHORT.get(str(k).lstrip("-"), str(k).lstrip("-").replace("_", "-")): v
                 for k, v in settings.items()}
        try:
            memory = megabytes(named["mem"]) if named.get("mem") not in (None, False, True) else None
        except ValueError:
            memory = None
        return Request(memory, slurm_seconds(named.get("time")))

    def cause_of(self, native: NativeState) -> str:
        return _CAUSES.get(native.state, "")

    def submit_command(self, job: Job) -> tuple[list[str], str | None]:
        scheduler_log = job.files.folder / "slurm-%j.out"
        return ["sbatch", "--parsable", f"--job-name={self.submitted_name(job)}", f"--output={scheduler_log}",
                f"--error={scheduler_log}", f"--chdir={job.files.folder}", *self.common_options(job),
                str(job.files.wrapper)], None

    def array_command(self, first: Job, common: list[str], dispatch: Path, folder: Path,
                      count: int) -> tuple[list[str], str | None]:
        scheduler_log = folder / "slurm-%A_%a.out"
        # The run's throttle also as Slurm's own (%k): the engine keeps at most that many jobs in flight across
        # arrays, and Slurm then holds to it within each array too, as pypoolparty's users see it in squeue.
        limit = self.run.max_in_flight or first.config["max_jobs_in_flight"]
        elements = f"1-{count}%{int(limit)}" if limit else f"1-{count}"
        return ["sbatch", "--parsable", f"--array={elements}", f"--job-name={self.submitted_name(first)}",
                f"--output={scheduler_log}", f"--error={scheduler_log}", f"--chdir={folder}", *common,
                str(dispatch)], None

    def array_job_ids(self, stdout: str, count: int) -> list[str]:
        base = self.job_id_of(stdout)
        return [f"{base}_{i}" for i in range(1, count + 1)] if base else []

    def on_final_state(self, job: Job, native: NativeState, state: JobState) -> JobState:
        # Without cgroups, Slurm's memory enforcement (JobAcctGatherParams=OverMemoryKill) ends a job FAILED
        # (JobLaunchFailure, signal 9): only the job's Slurm log says why.
        if state.status == JobStatus.aborted and not state.cause and native.state in ("FAILED", "CANCELLED"):
            if _MEMORY_KILL.search(self._scheduler_log_tail(job)):
                return replace(state, cause=causes.MEMORY,
                               reason=f"{state.reason}; Slurm's log: the job exceeded its memory limit")
        return state

    def _scheduler_log_tail(self, job: Job) -> str:
        """The end of the job's Slurm log (--output of sbatch), or ""."""
        job_id = str(job.job_id)
        candidates = [job.files.folder / f"slurm-{job_id}.out"]
        if "_" in job_id:
            arrays = self.run.config.resolve(job.config["task_file_dir"]) / "arrays"
            candidates += sorted(arrays.glob(f"*/slurm-{job_id}.out"))
        for log in candidates:
            try:
                with open(log, "rb") as f:
                    f.seek(0, 2)
                    f.seek(max(0, f.tell() - 8192))
                    return f.read().decode(errors="replace")
            except OSError:
                continue
        return ""

    def final_once_exit_code_written(self) -> set[str]:
        return {"COMPLETING"}

    @classmethod
    def status_command(cls, job_ids: list[str]) -> list[str]:
        # All of the user's jobs in one call: asking for ids that Slurm has already forgotten is an error.
        return ["squeue", "--noheader", "--array", "--states=all", "--format=%i|%T|%r|%N", f"--user={cls.user()}"]

    @classmethod
    def parse_status(cls, stdout: str) -> dict[str, NativeState]:
        states = {}
        for line in stdout.splitlines():
            fields = line.strip().split("|")
            if len(fields) < 2 or not fields[0].strip():
                continue
            state = fields[1].split()[0] if fields[1].strip() else "UNKNOWN"
            node = fields[-1].strip() if len(fields) >= 4 else ""
            reason = "|".join(fields[2:-1] if len(fields) >= 4 else fields[2:])
            reason = "" if reason in ("None", "(null)") else reason
            node = "" if node in ("(null)", "None") or "[" in node or "," in node else node  # one node, by name
            states[fields[0].strip()] = NativeState(state=state, reason=reason, node=node)
        return states

    @classmethod
    def cancel_command(cls, job_ids: list[str]) -> list[str]:
        return ["scancel", *job_ids]

    @classmethod
    def continue_command(cls, job_ids: list[str]) -> list[str] | None:
        return ["scancel", "--signal=CONT", "--full", *job_ids]  # --full: the batch step's processes too

    def tagged_command(self, scope: tuple[str, ...]) -> list[str]:
        return ["squeue", "--noheader", "--array", "--states=all", "--format=%i|%T|%j", f"--user={self.user()}"]

    def parse_tagged(self, stdout: str) -> dict[str, dict[str, NativeState]]:
        tagged: dict[str, dict[str, NativeState]] = {}
        for line in stdout.splitlines():
            fields = line.strip().split("|", 2)  # the name last: another tool's job name may hold a "|"
            if len(fields) == 3 and fields[0]:
                tagged.setdefault(fields[2], {})[fields[0]] = NativeState(state=fields[1].split()[0] if fields[1]
                                                                           else "UNKNOWN")
        return tagged

    def element_index(self, job_id: str) -> int | None:
        _, _, index = job_id.partition("_")
        return int(index) if index.isdigit() else None
