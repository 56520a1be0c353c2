"""Sun Grid Engine (and Son of / Univa Grid Engine): ``qsub -terse`` to submit, one ``qstat -xml`` per poll
for all jobs, ``qacct`` for jobs that left the queue without an exit-code file, ``qdel`` to kill.

qstat lists only pending and running jobs: a job leaves it when it ends, and its record reaches the accounting
file (``qacct``) on the next flush (``flush_finish_sec``). A rerun's tag query reads both, so a job that ended
well between the front-end's check and the rerun's adoption is followed, not submitted again.

States are letter codes (qstat(1), "state"): q queued, w waiting, h hold, r running, t transferring,
R restarted, s/S/T suspended, d deletion, E error.
"""

from __future__ import annotations

import logging
import re
import shutil
from pathlib import Path
import xml.etree.ElementTree as ElementTree
from typing import Any, ClassVar

from b2batch.engine import Job, JobState, JobStatus, NativeState, causes
from b2batch.engine.escalation import Request, megabytes, seconds
from b2batch.errors import SchedulerCommandError, SettingError
from b2batch.systems import command_runner
from b2batch.systems.scheduler import SchedulerSystem
from b2batch.systems.job_settings import WRAPPER_SETTINGS

logger = logging.getLogger(__name__)

#: sge_settings keys, their qsub options, and whether the value is a list of name=value resources.
QSUB_OPTIONS = {
    "queue": "-q", "q": "-q",
    "pe": "-pe",
    "resources": "-l", "l": "-l",
    "project": "-P", "P": "-P",
    "priority": "-p", "p": "-p",
    "account": "-A", "A": "-A",
    "mail_options": "-m", "m": "-m",
    "mail_user": "-M", "M": "-M",
    "reservation": "-R", "R": "-R",
    "ckpt": "-ckpt",
    "binding": "-binding",
    "notify": "-notify",
    "hold_jid": "-hold_jid",
    "hard": "-hard", "soft": "-soft",
}
_FLAGS = {"-notify", "-hard", "-soft"}


def qsub_options(settings: Any, task: Any) -> list[str]:
    """``sge_settings`` as qsub arguments, each key checked; an unknown one is a SettingError."""
    if not isinstance(settings, dict):
        raise SettingError(f"Task {task}: the setting 'sge_settings' must be a dict, e.g. {{\"queue\": \"all.q\", "
                           f"\"pe\": \"smp 2\", \"resources\": {{\"h_rt\": \"01:00:00\"}}}}, not {settings!r}.")
    arguments = []
    for key, value in settings.items():
        option = QSUB_OPTIONS.get(str(key).lstrip("-"))
        if option is None:
            raise SettingError(f"Task {task}: {key!r} in sge_settings is not a qsub option b2batch knows. Known "
                               f"keys: {', '.join(sorted(QSUB_OPTIONS))}.")
        if value is None or value is False:
            continue
        if option in _FLAGS:
            arguments.append(option)
        elif option == "-l" and isinstance(value, dict):
            arguments += [option, ",".join(f"{name}={v}" for name, v in value.items())]
        elif option == "-pe":
            parts = str(value).split() if isinstance(value, str) else [str(v) for v in value]
            if len(parts) != 2:
                raise SettingError(f"Task {task}: sge_settings['pe'] must be a parallel environment and a slot "
                                   f"count, e.g. \"smp 4\", not {value!r}.")
            arguments += [option, *parts]
        elif isinstance(value, (str, int, float)) and "\n" not in str(value):
            arguments += [option, str(value)]
        else:
            raise SettingError(f"Task {task}: sge_settings[{key!r}] must be a string or number, not {value!r}.")
    return arguments


#: States of a job qacct recorded: exit status 0 and not failed, or otherwise.
ENDED_WELL, ENDED_BADLY = "qacct-done", "qacct-failed"


def _expand_tasks(job_number: str, tasks: str | None) -> list[str]:
    """Job ids for a qstat line: ``12``, or ``12.5`` per array task (``5-20:1`` ranges expanded)."""
    if not tasks:
        return [job_number]
    ids = []
    for part in tasks.split(","):
        match = re.fullmatch(r"(\d+)(?:-(\d+)(?::(\d+))?)?", part.strip())
        if not match:
            continue
        first = int(match.group(1))
        last = int(match.group(2) or first)
        step = int(match.group(3) or 1)
        ids += [f"{job_number}.{i}" for i in range(first, last + 1, step)]
    return ids


def _resources(settings: Any) -> dict[str, str]:
    """The ``-l`` resources of ``sge_settings`` (a dict, or a ``name=value,...`` text), by name."""
    if not isinstance(settings, dict):
        return {}
    found: dict[str, str] = {}
    for key in ("resources", "l"):
        value = settings.get(key)
        if isinstance(value, dict):
            found.update({str(k): str(v) for k, v in value.items()})
        elif isinstance(value, str):
            found.update(dict(part.split("=", 1) for part in value.split(",") if "=" in part))
    return found


def _healed(settings: dict[str, Any], escalated: Request | None, excluded: tuple[str, ...]) -> dict[str, Any]:
    """``sge_settings`` with the escalated ``h_vmem``/``h_rt`` and ``h=!node`` (``h=!(a|b)``) resources."""
    resources = _resources(settings)
    healed = {k: v for k, v in settings.items() if k not in ("resources", "l")}
    if escalated is not None and escalated.memory_mb is not None:
        resources["h_vmem"] = f"{int(escalated.memory_mb)}M"
    if escalated is not None and escalated.time_s is not None:
        value = int(escalated.time_s)
        resources["h_rt"] = f"{value // 3600}:{value % 3600 // 60:02d}:{value % 60:02d}"
    if excluded:
        resources["h"] = f"!{excluded[0]}" if len(excluded) == 1 else f"!({'|'.join(excluded)})"
    healed["resources"] = resources
    return healed


def qacct_cause(out: str, exit_code: int, asked: Request) -> str:
    """Why Grid Engine ended a job, from its ``qacct`` record: killed (exit 137) with ``maxvmem`` at its
    ``h_vmem`` (memory) or ``ru_wallclock`` at its ``h_rt`` (time), or its ``failed`` field naming the limit."""
    failed = re.search(r"^failed\s+(\d+)\s*:?\s*(.*)$", out, re.M)
    words = failed.group(2) if failed else ""
    if exit_code != 137 and not (failed and failed.group(1) == "37"):
        return ""
    maxvmem = re.search(r"^maxvmem\s+(\S+)", out, re.M)
    wallclock = re.search(r"^ru_wallclock\s+(\S+)", out, re.M)
    try:
        used_mb = megabytes(maxvmem.group(1).upper().replace("B", "")) if maxvmem else 0.0
    except ValueError:
        used_mb = 0.0
    try:
        ran = float(wallclock.group(1).rstrip("s")) if wallclock else 0.0
    except ValueError:
        ran = 0.0
    if asked.memory_mb and used_mb >= 0.9 * asked.memory_mb:
        return causes.MEMORY
    if asked.time_s and ran >= asked.time_s - 1:
        return causes.TIME
    if "h_vmem" in words and "h_rt" not in words:
        return causes.MEMORY
    if "h_rt" in words and "h_vmem" not in words:
        return causes.TIME
    return ""


class SGESystem(SchedulerSystem):
    """Grid Engine in one run."""

    name = "sge"
    job_settings = (*WRAPPER_SETTINGS, "sge_settings")
    #: ``qsub -terse`` prints ``<id>``, or ``<id>.<first>-<last>:<step>`` for an array.
    job_id_formats: ClassVar[tuple[str, ...]] = ("{id:d}.{first:d}-{last:d}:{step:d}", "{id:d}")
    state_map: ClassVar[dict[str, JobStatus]] = {
        **{s: JobStatus.idle for s in ("qw", "hqw", "hRwq", "Rq", "Rwq", "hRq", "qwh")},
        **{s: JobStatus.running for s in ("r", "t", "Rr", "Rt", "s", "ts", "S", "tS", "T", "tT", "Rs", "Rts",
                                          "RS", "RtS", "RT", "RtT", "dr", "dt", "dRr", "dRt", "ds", "dS", "dT")},
        **{s: JobStatus.aborted for s in ("Eqw", "Ehqw", "EhRqw", "dqw", "dhqw", "dEqw")},
        # Not qstat's: the words of this module for a job qacct recorded (in the tag query's listing).
        ENDED_WELL: JobStatus.successful, ENDED_BADLY: JobStatus.aborted,
    }

    #: An ended job leaves qstat at once; qacct has it after the next accounting flush (flush_time, 15 s by
    #: default; reporting_params in ``qconf -sconf``).
    record_lag: ClassVar[float] = 16.0
    array_index: ClassVar[str | None] = "${SGE_TASK_ID}"
    lists_all_jobs: ClassVar[bool] = True

    def common_options(self, job: Job) -> list[str]:
        # Grid Engine ignores #! lines: -S names the shell. -V passes the submitter's environment on.
        shell = job.config["shell"]
        settings = job.config["sge_settings"] or {}
        escalated, excluded = self.escalated(job), self.excluded_nodes()
        if isinstance(settings, dict) and (escalated or excluded):
            settings = _healed(settings, escalated, excluded)
        return ["-V", "-S", shutil.which(shell) or shell, *qsub_options(settings, job)]

    def requested(self, job: Job) -> Request:
        resources = _resources(job.config["sge_settings"] or {})
        try:
            memory = megabytes(resources["h_vmem"]) if resources.get("h_vmem") else None
        except ValueError:
            memory = None
        try:
            time_s = seconds(resources["h_rt"]) if resources.get("h_rt") else None
        except ValueError:
            time_s = None
        return Request(memory, time_s)

    def submit_command(self, job: Job) -> tuple[list[str], str | None]:
        scheduler_log = job.files.folder / "sge.out"
        return ["qsub", "-terse", "-N", self.submitted_name(job), "-j", "y", "-o", str(scheduler_log),
                "-wd", str(job.files.folder), *self.common_options(job), str(job.files.wrapper)], None

    def array_command(self, first: Job, common: list[str], dispatch: Path, folder: Path,
                      count: int) -> tuple[list[str], str | None]:
        return ["qsub", "-terse", "-t", f"1-{count}", "-N", self.submitted_name(first), "-j", "y", "-o",
                f"{folder}/sge.$TASK_ID.out", "-wd", str(folder), *common, str(dispatch)], None

    def array_job_ids(self, stdout: str, count: int) -> list[str]:
        base = self.job_id_of(stdout)
        return [f"{base}.{i}" for i in range(1, count + 1)] if base else []

    def job_name(self, job: Job) -> str:
        # Grid Engine refuses names starting with a digit or containing / : @ (and spaces confuse it).
        name = re.sub(r"[/:@\s\\]", "_", super().job_name(job))
        return name if not name[:1].isdigit() else f"j{name}"

    @classmethod
    def status_command(cls, job_ids: list[str]) -> list[str]:
        return ["qstat", "-xml", "-u", cls.user()]

    @classmethod
    def parse_status(cls, stdout: str) -> dict[str, NativeState]:
        states = {}
        if not stdout.strip():
            return states
        for job in ElementTree.fromstring(stdout).iter("job_list"):
            number = job.findtext("JB_job_number", "").strip()
            state = job.findtext("state", "").strip()
            for job_id in _expand_tasks(number, job.findtext("tasks")):
                states[job_id] = NativeState(state=state, reason=_STATE_WORDS.get(state, ""))
        return states

    @classmethod
    def cancel_command(cls, job_ids: list[str]) -> list[str]:
        return ["qdel", *job_ids]

    def tagged_command(self, scope: tuple[str, ...]) -> list[str]:
        return self.status_command([])  # qstat -xml lists each job's name

    @staticmethod
    def _parse_queue_tags(stdout: str) -> dict[str, dict[str, NativeState]]:
        tagged: dict[str, dict[str, NativeState]] = {}
        for job in ElementTree.fromstring(stdout).iter("job_list") if stdout.strip() else ():
            found = tagged.setdefault(job.findtext("JB_name", "").strip(), {})
            for job_id in _expand_tasks(job.findtext("JB_job_number", "").strip(), job.findtext("tasks")):
                found[job_id] = NativeState(state=job.findtext("state", "").strip())
        return tagged

    def tagged_commands(self, scope: tuple[str, ...]) -> list[list[str]]:
        # qstat forgets an ended job at once; the accounting file has it (the user's b2batch jobs only: every tag
        # has ``.b2b`` in its name). qacct reads the whole file, but only for a rerun with intents left behind.
        return [self.tagged_command(scope), ["qacct", "-o", self.user(), "-j", "*.b2b*"]]

    def tagged_listing(self, command: list[str]) -> str:
        if command[0] != "qacct":
            return super().tagged_listing(command)
        done = command_runner.run(command, check=False, timeout=self.call_timeout, calls=self.calls)
        if done.returncode != 0 and "not found" not in done.stderr:
            # what qstat listed still counts; a job that ended and was not found is submitted again
            logger.warning("Could not read Grid Engine's accounting for jobs that ended since a steering "
                           "process was stopped (%s): %s", " ".join(command), done.stderr.strip()[-500:])
        return done.stdout if done.returncode == 0 else ""

    def parse_tagged(self, stdout: str) -> dict[str, dict[str, NativeState]]:
        if stdout.lstrip().startswith("="):  # qacct's records, oldest first: a later one is the newer word
            return _parse_accounting(stdout)
        return self._parse_queue_tags(stdout)

    def element_index(self, job_id: str) -> int | None:
        _, _, index = job_id.partition(".")
        return int(index) if index.isdigit() else None

    def on_final_state(self, job: Job, native: NativeState, state: JobState) -> JobState:
        if "E" in native.state:
            state = JobState(state.status, state.reason + self._error_reason(job), state.scheduler_side)
            self.cancel([job])  # a job in an error state would stay in the queue for ever
        return state

    def _error_reason(self, job: Job) -> str:
        try:
            out = command_runner.run(["qstat", "-j", str(job.job_id)], check=False, timeout=self.call_timeout,
                               calls=self.calls).stdout
        except SchedulerCommandError:
            return ""
        reasons = re.findall(r"^error reason\s+\d+:\s*(.*)$", out, re.M)
        return f": {reasons[0].strip()}" if reasons else ""

    def history(self, job: Job) -> NativeState | None:
        """What ``qacct`` recorded of the job, or None before the record is written."""
        number, _, task = str(job.job_id).partition(".")
        command = ["qacct", "-j", number, *(["-t", task] if task else [])]
        try:
            out = command_runner.run(command, check=False, timeout=self.call_timeout, calls=self.calls).stdout
        except SchedulerCommandError:
            return None
        failed = re.search(r"^failed\s+(\d+)\s*:?\s*(.*)$", out, re.M)
        exit_status = re.search(r"^exit_status\s+(\d+)", out, re.M)
        if not exit_status:
            return None
        reason = f"qacct: failed {failed.group(1)} {failed.group(2).strip()}".strip() if failed else ""
        host = re.search(r"^hostname\s+(\S+)", out, re.M)
        code = int(exit_status.group(1))
        return NativeState(state="FINISHED", reason=reason, exit_code=code, node=host.group(1) if host else "",
                           cause=qacct_cause(out, code, self.requested(job)))


def _parse_accounting(stdout: str) -> dict[str, dict[str, NativeState]]:
    """``qacct -j`` records (blocks after lines of ``=``) by job name, their states by job id."""
    tagged: dict[str, dict[str, NativeState]] = {}
    for block in re.split(r"^=+\s*$", stdout, flags=re.M):
        fields = dict(line.split(None, 1) for line in block.splitlines() if len(line.split(None, 1)) == 2)
        name, number = fields.get("jobname", "").strip(), fields.get("jobnumber", "").strip()
        if not name or not number.isdigit():
            continue
        task = fields.get("taskid", "").strip()
        job_id = f"{number}.{task}" if task.isdigit() else number
        failed, status = fields.get("failed", "").split(), fields.get("exit_status", "").split()
        code = int(status[0]) if status and status[0].isdigit() else None
        well = code == 0 and failed[:1] == ["0"]
        tagged.setdefault(name, {})[job_id] = NativeState(state=ENDED_WELL if well else ENDED_BADLY, exit_code=code)
    return tagged


_STATE_WORDS = {"Eqw": "error state", "hqw": "on hold", "dr": "being deleted", "t": "transferring"}
