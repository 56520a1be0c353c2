"""The batch systems' accounting commands, one command builder and one parser per system.

Each builder names all the jobs that ended since the last poll cycle in ONE command; each parser turns its
output into :class:`~b2batch.engine.usage.Usage` values by job id (the ids b2batch uses: ``123`` or
``123_4`` on Slurm, ``12`` or ``12.3`` on SGE, ``16.0`` on HTCondor, ``123`` or ``123[4]`` on LSF). A job
missing from the output has no record yet (or none at all); parsers skip lines they cannot read.

- Slurm: ``sacct --parsable2 --noheader -j ID,ID,... --format=JobID,State,ExitCode,Elapsed,TotalCPU,MaxRSS,
  ReqMem,ReqCPUS,NodeList``; MaxRSS is on the job's steps (``ID.batch``), the rest on the allocation line.
- SGE: ``qacct -j ID`` for one job; for several, ``qacct -j 'PATTERN'`` with the run's job-name pattern
  (qacct takes one job id, name or pattern per call): one call per cycle, whose output holds every ended job
  of the run so far (the parser keeps what was asked for).
- HTCondor: ``condor_history -json -attributes ... ID ID ...``.
- LSF: ``bjobs -json -a -o "jobid stat exit_code cpu_used max_mem memlimit exec_host run_time nreq_slot
  exit_reason" ID ID ...``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from b2batch.engine.usage import Usage, duration_seconds, memory_bytes

# --- Slurm ------------------------------------------------------------------------------------------------

SACCT_FORMAT = "JobID,State,ExitCode,Elapsed,TotalCPU,MaxRSS,ReqMem,ReqCPUS,NodeList"
#: sacct's states of a job whose record is not final; a record with ReqCPUS 0 is not complete either.
_SLURM_NOT_ENDED = frozenset({"PENDING", "RUNNING", "REQUEUED", "RESIZING", "SUSPENDED", "COMPLETING", ""})


def sacct_command(job_ids: list[str]) -> list[str]:
    return ["sacct", "--parsable2", "--noheader", "-j", ",".join(job_ids), f"--format={SACCT_FORMAT}"]


def parse_sacct(stdout: str) -> dict[str, Usage]:
    jobs: dict[str, dict[str, Any]] = {}
    peaks: dict[str, int] = {}
    for line in stdout.splitlines():
        cells = line.strip().split("|")
        if len(cells) < 9 or not cells[0]:
            continue
        job_id, state, exit_code, elapsed, total_cpu, max_rss, req_mem, req_cpus, nodes = cells[:9]
        base, _, step = job_id.partition(".")
        rss = memory_bytes(max_rss, "K")
        if rss is not None:
            peaks[base] = max(peaks.get(base, 0), rss)
        if step:
            continue
        if (state.split() or [""])[0] in _SLURM_NOT_ENDED or not req_cpus.strip("0"):
            continue  # not final yet (the database gets a job's figures after it ended): asked again next time
        cpus = int(req_cpus) if req_cpus.isdigit() else None
        memory = memory_bytes(req_mem, "M")
        if memory is not None and req_mem.endswith("c") and cpus:  # per CPU (Slurm before 21.08)
            memory *= cpus
        word = state.split()[0] if state.strip() else ""
        code = exit_code.split(":")[0]
        jobs[base] = {"wall": duration_seconds(elapsed), "cpu": duration_seconds(total_cpu), "req_mem": memory or None,
                      "req_cpus": cpus, "host": nodes if nodes and nodes != "None assigned" else None,
                      "state": word, "exit_code": int(code) if code.isdigit() else None,
                      "cause": {"OUT_OF_MEMORY": "memory", "TIMEOUT": "time"}.get(word, "")}
    return {job_id: Usage(**fields, max_rss=peaks.get(job_id), source="sacct") for job_id, fields in jobs.items()}


# --- SGE --------------------------------------------------------------------------------------------------

def qacct_command(job_ids: list[str], name_pattern: str) -> list[str]:
    return ["qacct", "-j", job_ids[0] if len(job_ids) == 1 else name_pattern]


def _sge_limit(category: str, name: str) -> str | None:
    found = re.search(rf"(?:^|[\s,]){name}=([^\s,]+)", category)
    return found.group(1) if found else None


def parse_qacct(stdout: str) -> dict[str, Usage]:
    found: dict[str, Usage] = {}
    for block in re.split(r"^=+\s*$", stdout, flags=re.MULTILINE):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            key, _, value = line.strip().partition(" ")
            if key:
                fields[key] = value.strip()
        if not fields.get("jobnumber"):
            continue
        task = fields.get("taskid", "undefined")
        job_id = fields["jobnumber"] if task in ("undefined", "", "0") else f"{fields['jobnumber']}.{task}"
        # SGE prints ru_maxrss (kilobytes) through its byte formatter: "207.844KB" is 207.844 MB.
        rss = memory_bytes(fields.get("ru_maxrss"))
        vmem = memory_bytes(fields.get("maxvmem"))
        category = fields.get("category", "")
        limit = _sge_limit(category, "h_vmem") or _sge_limit(category, "mem_free") or _sge_limit(category, "mem")
        slots = fields.get("slots", "")
        requested = memory_bytes(limit, "B")
        if requested is not None and slots.isdigit() and _sge_limit(category, "h_vmem"):
            requested *= int(slots)  # h_vmem is per slot
        exit_code = int(fields["exit_status"]) if fields.get("exit_status", "").isdigit() else None
        wall = duration_seconds(fields.get("ru_wallclock", "").rstrip("s"))
        cause = ""
        if exit_code in (137, 152) or (exit_code or 0) > 128:
            runtime = _sge_limit(category, "h_rt") or _sge_limit(category, "s_rt")
            if requested and vmem and vmem >= 0.95 * requested:
                cause = "memory"
            elif runtime and wall is not None and wall >= (duration_seconds(runtime) or 0) - 1:
                cause = "time"
        found[job_id] = Usage(wall=wall, cpu=duration_seconds(fields.get("cpu", "").rstrip("s")),
                              max_rss=rss * 1024 if rss is not None else vmem, req_mem=requested,
                              req_cpus=int(slots) if slots.isdigit() else None, host=fields.get("hostname") or None,
                              state=_sge_failed(fields.get("failed", "0")), exit_code=exit_code,
                              cause=cause, source="qacct")
    return found


def _sge_failed(value: str) -> str:
    """qacct's ``failed`` field as a state: "" for 0, else ``failed 100: assumedly after job``."""
    code, _, why = value.partition(":")
    return "" if code.strip() in ("", "0") else f"failed {code.strip()}: {why.strip()}".rstrip(": ")


# --- HTCondor ---------------------------------------------------------------------------------------------

HISTORY_ATTRIBUTES = ("ClusterId,ProcId,JobStatus,ExitCode,RemoteWallClockTime,RemoteUserCpu,RemoteSysCpu,MemoryUsage,"
                      "ResidentSetSize,RequestMemory,RequestCpus,LastRemoteHost,HoldReasonCode,RemoveReason")
#: HoldReasonCode 34: the job went over its memory request (cgroup limit); 47/46: walltime limits.
_CONDOR_CAUSES = {34: "memory", 46: "time", 47: "time"}


def condor_history_command(job_ids: list[str]) -> list[str]:
    return ["condor_history", "-json", "-attributes", HISTORY_ATTRIBUTES, *job_ids]


def parse_condor_history(stdout: str) -> dict[str, Usage]:
    text = stdout.strip()
    if not text:
        return {}
    try:
        ads = json.loads(text)
    except ValueError:
        return {}
    found = {}
    for ad in ads if isinstance(ads, list) else []:
        if not isinstance(ad, dict) or "ClusterId" not in ad:
            continue
        job_id = f"{ad['ClusterId']}.{ad.get('ProcId', 0)}"
        cpu = None
        if ad.get("RemoteUserCpu") is not None or ad.get("RemoteSysCpu") is not None:
            cpu = float(ad.get("RemoteUserCpu") or 0) + float(ad.get("RemoteSysCpu") or 0)
        rss = memory_bytes(ad.get("ResidentSetSize"), "K") or memory_bytes(ad.get("MemoryUsage"), "M")
        host = str(ad.get("LastRemoteHost") or "").split("@")[-1] or None
        reason = str(ad.get("RemoveReason") or "")
        cause = _CONDOR_CAUSES.get(int(ad.get("HoldReasonCode") or 0), "")
        if not cause and re.search(r"memory", reason, re.IGNORECASE):
            cause = "memory"
        found[job_id] = Usage(wall=_number(ad.get("RemoteWallClockTime")), cpu=cpu, max_rss=rss,
                              req_mem=memory_bytes(ad.get("RequestMemory"), "M"),
                              req_cpus=int(ad["RequestCpus"]) if isinstance(ad.get("RequestCpus"), int) else None,
                              host=host, state=str(ad.get("JobStatus", "")),
                              exit_code=ad.get("ExitCode") if isinstance(ad.get("ExitCode"), int) else None,
                              cause=cause, source="condor_history")
    return found


# --- LSF --------------------------------------------------------------------------------------------------

BJOBS_FIELDS = "jobid stat exit_code cpu_used max_mem memlimit exec_host run_time nreq_slot exit_reason"


def bjobs_usage_command(job_ids: list[str]) -> list[str]:
    return ["bjobs", "-json", "-a", "-o", BJOBS_FIELDS, *job_ids]


def parse_bjobs_usage(stdout: str) -> dict[str, Usage]:
    try:
        data = json.loads(stdout)
    except ValueError:
        return {}
    found = {}
    for record in data.get("RECORDS", []) if isinstance(data, dict) else []:
        if not isinstance(record, dict) or record.get("ERROR") or not record.get("JOBID"):
            continue
        reason = str(record.get("EXIT_REASON") or "")
        code = str(record.get("EXIT_CODE") or "")
        slots = str(record.get("NREQ_SLOT") or "")
        host = str(record.get("EXEC_HOST") or "").split(":")[0]
        host = host.split("*", 1)[-1] or None  # "2*hostA" for two slots
        stat = str(record.get("STAT") or "")
        found[str(record["JOBID"])] = Usage(
            wall=duration_seconds(str(record.get("RUN_TIME") or "").split(" second")[0] or None),
            cpu=duration_seconds(str(record.get("CPU_USED") or "").split(" second")[0] or None),
            max_rss=memory_bytes(_lsf_memory(record.get("MAX_MEM")), "K"),
            req_mem=memory_bytes(_lsf_memory(record.get("MEMLIMIT")), "K"),
            req_cpus=int(slots) if slots.isdigit() else None, host=host, state=stat,
            exit_code=int(code) if code.isdigit() else (0 if stat == "DONE" else None),
            cause="memory" if "TERM_MEMLIMIT" in reason else ("time" if "TERM_RUNLIMIT" in reason else ""),
            source="bjobs")
    return found


def _lsf_memory(value: Any) -> str | None:
    """``300 Mbytes``, ``1 G``, ``2 Gbytes``, ``-`` as a unit-suffixed number (LSF's default unit is KB)."""
    text = str(value or "").strip()
    match = re.fullmatch(r"([0-9.]+)\s*([KMGT]?)(?:bytes|B)?", text, re.IGNORECASE)
    return f"{match.group(1)}{match.group(2).upper()}" if match else None


def _number(value: Any) -> float | None:
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _slurm(job_ids: list[str], tag: str) -> list[str]:
    return sacct_command(job_ids)


def _sge(job_ids: list[str], tag: str) -> list[str]:
    return qacct_command(job_ids, f"*.b2b{tag}*")  # the run tag, then the submission's (systems/tagging.py)


#: Each batch system's accounting: (command builder taking the job ids and the run's tag, parser).
BY_SYSTEM: dict[str, tuple[Callable[[list[str], str], list[str]], Callable[[str], dict[str, Usage]]]] = {
    "slurm": (_slurm, parse_sacct),
    "sge": (_sge, parse_qacct),
    "htcondor": (lambda ids, tag: condor_history_command(ids), parse_condor_history),
    "lsf": (lambda ids, tag: bjobs_usage_command(ids), parse_bjobs_usage),
}
