"""LSF: ``bsub`` to submit, one ``bjobs -json -a`` per poll for all the run's jobs, ``bkill`` to kill.

STAT values: https://www.ibm.com/docs/en/spectrum-lsf/10.1.0?topic=bjobs-description
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, ClassVar

from b2batch.engine import Job, JobState, JobStatus, NativeState, causes
from b2batch.engine.escalation import Request, megabytes
from b2batch.errors import SettingError
from b2batch.systems.scheduler import SchedulerSystem
from b2batch.jobscript.templating import quote
from b2batch.systems.job_settings import WRAPPER_SETTINGS

#: bsub options a task may set in ``lsf_settings`` (name without the dash).
BSUB_OPTIONS = frozenset("""
W M R n q P G app sla m L u B N x E Ep w We wa wt c F D S C hl rn r k gpu sp ti env outdir data Lp U ext alloc_flags
""".split())
#: Options b2batch sets itself.
BSUB_RESERVED = frozenset({"J", "o", "e", "oo", "eo", "cwd", "K", "I", "Ip", "Is"})


def bsub_options(task: Any) -> list[str]:
    """``queue``, ``job_slots`` and ``lsf_settings`` of the task as bsub arguments, each checked."""
    arguments = []
    queue = task.config["queue"]
    if queue:
        arguments += ["-q", str(queue)]
    slots = task.config["job_slots"]
    if slots:
        arguments += ["-n", str(slots)]
    settings = task.config["lsf_settings"] or {}
    if not isinstance(settings, dict):
        raise SettingError(f"Task {task}: the setting 'lsf_settings' must be a dict of bsub options, e.g. "
                           f"{{\"W\": \"60\", \"R\": \"rusage[mem=2000]\"}}, not {settings!r}.")
    for key, value in settings.items():
        name = str(key).lstrip("-")
        if name in BSUB_RESERVED:
            raise SettingError(f"Task {task}: lsf_settings sets -{name}, which b2batch sets itself; remove it.")
        if name not in BSUB_OPTIONS:
            raise SettingError(f"Task {task}: {key!r} in lsf_settings is not a bsub option b2batch knows. Known: "
                               f"{', '.join(sorted(BSUB_OPTIONS))}.")
        if value is True:
            arguments.append(f"-{name}")
        elif value not in (None, False):
            if "\n" in str(value):
                raise SettingError(f"Task {task}: lsf_settings[{key!r}] contains a line break.")
            arguments += [f"-{name}", str(value)]
    return arguments


#: Why LSF ended a job, by the start of its EXIT_REASON.
_CAUSES = {"TERM_MEMLIMIT": causes.MEMORY, "TERM_RUNLIMIT": causes.TIME, "TERM_HOST_LOST": causes.NODE}
_SELECT = re.compile(r"select\[(.*?)\]")
_ELEMENT = re.compile(r"\[(\d+)\]$")


def lsf_seconds(value: Any) -> float | None:
    """Seconds of a bsub ``-W`` value (``[hour:]minute``); None if unreadable."""
    if value in (None, False, True, ""):
        return None
    hours, _, minutes = str(value).strip().rpartition(":")
    if not minutes.isdigit() or (hours and not hours.isdigit()):
        return None
    return float((int(hours or 0) * 60 + int(minutes)) * 60)


def _healed(options: list[str], escalated: Request | None, excluded: tuple[str, ...]) -> list[str]:
    """bsub options with the escalated ``-M``/``-W`` and ``select[hname!=...]`` for the excluded nodes."""
    healed: list[str] = []
    resreq = None
    skip = False
    for i, option in enumerate(options):  # -M, -W and -R always come with a value
        if skip:
            skip = False
            continue
        if escalated is not None and ((option == "-M" and escalated.memory_mb is not None)
                                      or (option == "-W" and escalated.time_s is not None)):
            skip = True
        elif option == "-R" and excluded and i + 1 < len(options):
            resreq, skip = options[i + 1], True
        else:
            healed.append(option)
    if escalated is not None and escalated.memory_mb is not None:
        healed += ["-M", f"{int(escalated.memory_mb)}MB"]
    if escalated is not None and escalated.time_s is not None:
        minutes = int(-(-escalated.time_s // 60))
        healed += ["-W", f"{minutes // 60}:{minutes % 60:02d}"]
    if excluded:
        avoid = " && ".join(f"hname!={node}" for node in excluded)
        if resreq and _SELECT.search(resreq):
            resreq = _SELECT.sub(lambda m: f"select[({m.group(1)}) && {avoid}]", resreq, count=1)
        else:
            resreq = f"{resreq} select[{avoid}]" if resreq else f"select[{avoid}]"
        healed += ["-R", resreq]
    return healed


class LSFSystem(SchedulerSystem):
    """LSF in one run."""

    name = "lsf"
    job_settings = (*WRAPPER_SETTINGS, "queue", "job_slots", "lsf_settings")
    job_id_formats: ClassVar[tuple[str, ...]] = ("Job <{id:d}> is submitted to queue <{queue}>.",
                                                 "Job <{id:d}> is submitted to default queue <{queue}>.")
    state_map: ClassVar[dict[str, JobStatus]] = {
        "PEND": JobStatus.idle,
        "PROV": JobStatus.idle,
        "WAIT": JobStatus.idle,
        "PSUSP": JobStatus.idle,
        "RUN": JobStatus.running,
        "USUSP": JobStatus.running,
        "SSUSP": JobStatus.running,
        "UNKWN": JobStatus.aborted,  # the host lost contact: the job is killed and counts as lost
        "DONE": JobStatus.successful,
        "EXIT": JobStatus.aborted,
        "ZOMBI": JobStatus.aborted,
    }

    scheduler_side_states: ClassVar[frozenset[str]] = frozenset({"UNKWN", "ZOMBI"})

    array_index: ClassVar[str | None] = "${LSB_JOBINDEX}"

    def common_options(self, job: Job) -> list[str]:
        options = bsub_options(job)
        escalated, excluded = self.escalated(job), self.excluded_nodes()
        return _healed(options, escalated, excluded) if escalated or excluded else options

    def requested(self, job: Job) -> Request:
        settings = job.config["lsf_settings"] or {}
        if not isinstance(settings, dict):
            return Request()
        named = {str(k).lstrip("-"): v for k, v in settings.items()}
        try:
            memory = megabytes(str(named["M"]).rstrip("!").strip()) if named.get("M") not in (None, False, True) else None
        except ValueError:
            memory = None
        return Request(memory, lsf_seconds(named.get("W")))

    def cause_of(self, native: NativeState) -> str:
        if native.state in ("UNKWN", "ZOMBI"):
            return causes.NODE
        for term, cause in _CAUSES.items():
            if native.reason.startswith(term):
                return cause
        return ""

    def submit_command(self, job: Job) -> tuple[list[str], str | None]:
        folder = job.files.folder
        # bsub hands the command line to a shell: the path is quoted for it.
        return ["bsub", "-J", self.submitted_name(job), "-o", str(folder / "lsf.out"), "-e", str(folder / "lsf.err"),
                "-cwd", str(folder), *self.common_options(job), quote(job.files.wrapper)], None

    def array_command(self, first: Job, common: list[str], dispatch: Path, folder: Path,
                      count: int) -> tuple[list[str], str | None]:
        return ["bsub", "-J", f"{self.submitted_name(first)}[1-{count}]", "-o", f"{folder}/lsf.%I.out", "-e",
                f"{folder}/lsf.%I.err", "-cwd", str(folder), *common, quote(dispatch)], None

    def array_job_ids(self, stdout: str, count: int) -> list[str]:
        base = self.job_id_of(stdout)
        return [f"{base}[{i}]" for i in range(1, count + 1)] if base else []

    @classmethod
    def status_command(cls, job_ids: list[str]) -> list[str]:
        return ["bjobs", "-json", "-a", "-o", "jobid stat exit_code exec_host exit_reason", *job_ids]

    @classmethod
    def parse_status(cls, stdout: str) -> dict[str, NativeState]:
        if not stdout.strip():
            return {}
        states = {}
        for record in json.loads(stdout).get("RECORDS", []):
            if record.get("ERROR") or not record.get("JOBID"):
                continue  # "Job <123> is not found": LSF forgot it; the exit-code file decides
            exit_code = record.get("EXIT_CODE") or ""
            host = str(record.get("EXEC_HOST") or "").split(":")[0].rpartition("*")[2]
            states[record["JOBID"]] = NativeState(state=record.get("STAT", ""),
                                                  reason=str(record.get("EXIT_REASON") or ""),
                                                  exit_code=int(exit_code) if exit_code.isdigit() else None,
                                                  node="" if host in ("-", "") else host)
        return states

    @classmethod
    def cancel_command(cls, job_ids: list[str]) -> list[str]:
        return ["bkill", *job_ids]

    @classmethod
    def continue_command(cls, job_ids: list[str]) -> list[str] | None:
        return ["bkill", "-s", "CONT", *job_ids]

    def tagged_command(self, scope: tuple[str, ...]) -> list[str]:
        return ["bjobs", "-json", "-a", "-o", "jobid stat job_name"]  # all of the user's jobs

    def parse_tagged(self, stdout: str) -> dict[str, dict[str, NativeState]]:
        tagged: dict[str, dict[str, NativeState]] = {}
        for record in json.loads(stdout).get("RECORDS", []) if stdout.strip() else []:
            if record.get("JOBID") and not record.get("ERROR"):
                name = _ELEMENT.sub("", str(record.get("JOB_NAME") or ""))  # an element is named "tag[3]"
                tagged.setdefault(name, {})[record["JOBID"]] = NativeState(state=record.get("STAT", ""))
        return tagged

    def element_index(self, job_id: str) -> int | None:
        found = _ELEMENT.search(job_id)
        return int(found.group(1)) if found else None

    def on_final_state(self, job: Job, native: NativeState, state: JobState) -> JobState:
        if native.state in ("UNKWN", "ZOMBI"):
            self.cancel([job])  # make sure a lost job cannot come back and write its outputs later
        return state
