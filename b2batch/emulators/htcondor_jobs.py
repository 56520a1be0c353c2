"""HTCondor jobs: ads built from a submit description, the live job ad, and the job life cycle.

The static part of an ad (``ClusterId``, ``Cmd``, ``Iwd``, ``RequestCpus``, custom ``+Attr`` ...) is
stored with the job at submission; :func:`job_ad` adds the attributes that change (``JobStatus``,
``EnteredCurrentStatus``, ``ExitCode``, ``HoldReason`` ...). Attributes starting with ``_`` are
internal and never shown.
"""

from __future__ import annotations

import fnmatch
import os
from typing import Any

from b2batch.emulators import eventlog, slots, job_table
from b2batch.emulators.classad import parse_literal
from b2batch.emulators.common import current_user, hostname
from b2batch.emulators.slots import StartError
from b2batch.emulators.job_table import JobTable
from b2batch.emulators.submit_file import (
    ProcDescription,
    SubmitError,
    disk_kb,
    memory_mb,
    split_arguments,
    split_environment,
)

IDLE, RUNNING, REMOVED, COMPLETED, HELD = 1, 2, 3, 4, 5
_STATUS = {
    job_table.PENDING: IDLE,
    job_table.STARTING: IDLE,
    job_table.RUNNING: RUNNING,
    job_table.REMOVED: REMOVED,
    job_table.EXITED: COMPLETED,
    job_table.HELD: HELD,
    job_table.LOST: REMOVED,
}
UNIVERSES = {"vanilla": 5, "scheduler": 7, "local": 12}
DEFAULT_MEMORY_MB = 128
HOLD_CODES = {"exec": 6, "stdout": 7, "stderr": 7, "stdin": 8, "cwd": 14}


def address(kind: str = "schedd") -> str:
    """The sinful string of the emulated daemon, as event logs show it."""
    return f"<127.0.0.1:9618?addrs=127.0.0.1-9618&alias={hostname()}&noUDP&sock={kind}_{os.getuid()}_1>"


def quote_argument(arg: str) -> str:
    """One argument in the new (V2) syntax: single-quoted when it has spaces or quotes."""
    if arg and not any(c in arg for c in " \t'\""):
        return arg
    return "'" + arg.replace("'", "''").replace('"', '""') + "'"


def _absolute(path: str, base: str) -> str:
    return os.path.normpath(os.path.join(base, os.path.expanduser(path)))


def _job_env(desc: ProcDescription, submit_env: dict[str, str], iwd: str, cpus: int) -> dict[str, str]:
    getenv = desc.get("getenv", default="false")
    env: dict[str, str] = {}
    if getenv.lower() in ("true", "yes", "1"):
        env.update(submit_env)
    elif getenv.lower() not in ("false", "no", "0"):
        patterns = [p.strip() for p in getenv.split(",") if p.strip()]
        env.update({k: v for k, v in submit_env.items() if any(fnmatch.fnmatchcase(k, p) for p in patterns)})
    env.update(split_environment(desc.get("environment", "env")))
    env.update(
        {
            "BATCH_SYSTEM": "HTCondor",
            "_CONDOR_SCRATCH_DIR": iwd,
            "_CONDOR_SLOT": "slot1",
            "_CONDOR_JOB_IWD": iwd,
            "OMP_NUM_THREADS": str(cpus),
        }
    )
    return env


def build_proc(
    desc: ProcDescription, cluster: int, cwd: str, now: float, submit_env: dict[str, str], batch_name: str | None
) -> tuple[dict[str, Any], dict[str, Any], int]:
    """Static ad, run spec and CPU count of one proc; raises :class:`SubmitError` like condor_submit."""
    universe = desc.get("universe", default="vanilla").lower()
    if universe not in UNIVERSES:
        raise SubmitError(f"ERROR: universe '{universe}' is not emulated (vanilla, local and scheduler are)")
    iwd = _absolute(desc.get("initialdir", "initial_dir", "iwd", default=cwd), cwd)
    if not os.path.isdir(iwd):
        raise SubmitError(f"ERROR: No such directory: {iwd}")
    executable = desc.get("executable")
    if not executable:
        raise SubmitError("ERROR: No 'executable' parameter was provided")
    cmd = _absolute(executable, cwd)
    if not os.path.exists(cmd) and os.path.exists(_absolute(executable, iwd)):
        cmd = _absolute(executable, iwd)
    if not os.path.exists(cmd):
        raise SubmitError(f"ERROR: Executable file {cmd} does not exist")
    args = split_arguments(desc.commands.get("arguments") or desc.commands.get("args") or "")
    cpus = int(desc.get("request_cpus", "requestcpus", default="1"))
    memory = memory_mb(desc.get("request_memory", "requestmemory", default=str(DEFAULT_MEMORY_MB)))
    files = {key: _absolute(desc.get(key, default="/dev/null"), iwd) for key in ("output", "error", "input")}
    log = desc.get("log", "userlog")
    log = _absolute(log, iwd) if log else ""
    if log:
        try:
            open(log, "a").close()
        except OSError as exc:
            raise SubmitError(f'ERROR: Invalid log file: "{log}" ({exc.strerror})') from exc
    env = _job_env(desc, submit_env, iwd, cpus)
    user = current_user()
    ad: dict[str, Any] = {
        "MyType": "Job",
        "TargetType": "Machine",
        "ClusterId": cluster,
        "ProcId": desc.proc,
        "GlobalJobId": f"{hostname()}#{cluster}.{desc.proc}#{int(now)}",
        "Owner": user,
        "User": f"{user}@{hostname()}",
        "QDate": int(now),
        "JobUniverse": UNIVERSES[universe],
        "Cmd": cmd,
        "Arguments": " ".join(quote_argument(a) for a in args),
        "Iwd": iwd,
        "In": files["input"],
        "Out": files["output"],
        "Err": files["error"],
        "RequestCpus": cpus,
        "RequestMemory": memory,
        "JobPrio": int(desc.get("priority", default="0")),
        "Environment": " ".join(
            quote_argument(f"{k}={v}") for k, v in split_environment(desc.get("environment", "env")).items()
        ),
        "GetEnv": desc.get("getenv", default="false").lower() in ("true", "yes", "1"),
        "ShouldTransferFiles": desc.get("should_transfer_files", default="IF_NEEDED").upper(),
        "WhenToTransferOutput": desc.get("when_to_transfer_output", default="ON_EXIT").upper(),
    }
    if log:
        ad["UserLog"] = log
    if desc.get("request_disk"):
        ad["RequestDisk"] = disk_kb(desc.get("request_disk"))
    for key, attr in (("transfer_input_files", "TransferInput"), ("transfer_output_files", "TransferOutput")):
        if desc.get(key):
            ad[attr] = desc.get(key)
    name = batch_name or desc.get("batch_name", "jobbatchname")
    if name:
        ad["JobBatchName"] = name.strip('"')
    for attr, value in desc.custom.items():
        ad[attr] = parse_literal(value)
    spec = {
        "argv": [cmd] + args,
        "cwd": iwd,
        "env": env,
        "stdin": None if files["input"] == "/dev/null" else files["input"],
        "stdout": files["output"],
        "stderr": files["error"],
        "append_stdout": False,
        "append_stderr": False,
    }
    return ad, spec, cpus


def job_ad(job: dict[str, Any], now: float) -> dict[str, Any]:
    """The full ClassAd of a job record, typed like condor_q -json prints it."""
    ad = {k: v for k, v in job["attrs"].items() if not k.startswith("_")}
    status = job["status"]
    ad["JobStatus"] = _STATUS[status]
    ad["LastJobStatus"] = _STATUS.get(job.get("last_status") or job_table.PENDING, IDLE)
    ad["EnteredCurrentStatus"] = int(job["status_time"])
    ad["NumJobStarts"] = int(job.get("num_starts") or 0)
    ad["ExitBySignal"] = False  # HTCondor 25 gives every job this attribute from its submission on
    ad["CompletionDate"] = int(job["end_time"]) if status == job_table.EXITED and job.get("end_time") else 0
    if job.get("start_time"):
        ad["JobStartDate"] = ad["JobCurrentStartDate"] = int(job["start_time"])
        end = job.get("end_time") if status != job_table.RUNNING else None
        ad["RemoteWallClockTime"] = float(round((end or now) - job["start_time"], 1))
    else:
        ad["RemoteWallClockTime"] = 0.0
    if status == job_table.RUNNING:
        ad["RemoteHost"] = f"slot1@{hostname()}"
    # HTCondor sets it when the job leaves the slot it was matched to, also when it failed to start there.
    matched = job.get("start_time") or job.get("hold_code") in HOLD_CODES.values()
    if matched and status != job_table.RUNNING:
        ad["LastRemoteHost"] = f"slot1@{hostname()}"
    if job.get("max_rss_kb") is not None:  # the job ended: what it used (condor_history's accounting)
        ad["RemoteUserCpu"] = float(job.get("cpu_user") or 0.0)
        ad["RemoteSysCpu"] = float(job.get("cpu_sys") or 0.0)
        ad["ResidentSetSize"] = int(job["max_rss_kb"])
        ad["MemoryUsage"] = (int(job["max_rss_kb"]) + 1023) // 1024
    if status == job_table.EXITED:
        by_signal = job.get("signal") is not None
        ad["ExitBySignal"] = by_signal
        if by_signal:
            ad["ExitSignal"] = int(job["signal"])
        else:
            ad["ExitCode"] = int(job.get("exit_code") or 0)
    if status == job_table.HELD:
        ad["HoldReason"] = job.get("reason") or ""
        ad["HoldReasonCode"] = int(job.get("hold_code") or 0)
        ad["HoldReasonSubCode"] = int(job.get("hold_subcode") or 0)
    if status == job_table.REMOVED:
        ad["RemoveReason"] = job.get("reason") or ""
        # As HTCondor 25: a job removed while it ran was killed by SIGTERM; one that never ran was not.
        ad["ExitBySignal"] = job.get("signal") is not None
        if job.get("signal") is not None:
            ad["ExitSignal"] = int(job["signal"])
    return ad


def _ids(job: dict[str, Any]) -> tuple[int, int]:
    return int(job["attrs"]["ClusterId"]), int(job["attrs"]["ProcId"])


def _log(job: dict[str, Any]) -> str | None:
    log: str | None = job["attrs"].get("UserLog")
    return log


def hold(table: JobTable, job: dict[str, Any], reason: str, code: int, subcode: int = 0) -> None:
    """Put a queued job on hold (JobStatus 5); a running job's processes are killed."""
    was_active = job["status"] in job_table.ACTIVE
    table.update(job, status=job_table.HELD, reason=reason, hold_code=code, hold_subcode=subcode)
    if was_active:
        slots.stop(table, job)
    eventlog.held(_log(job), *_ids(job), table.now, reason, code, subcode)


def release(table: JobTable, job: dict[str, Any], by: str) -> None:
    """Release a held job: it becomes idle and will run again."""
    table.update(job, status=job_table.PENDING, reason=None, hold_code=None, hold_subcode=None)
    eventlog.released(_log(job), *_ids(job), table.now, f"via condor_release (by user {by})")


def remove(table: JobTable, job: dict[str, Any], by: str) -> None:
    """condor_rm: the job leaves the queue (JobStatus 3, then history); its processes are killed."""
    was_active = job["status"] in job_table.ACTIVE
    reason = f"via condor_rm (by user {by})"
    running = job["status"] == job_table.RUNNING
    table.update(job, status=job_table.REMOVED, reason=reason, end_time=table.now, signal=15 if running else None)
    if was_active:
        slots.stop(table, job)
    if running:
        eventlog.evicted(_log(job), *_ids(job), table.now, reason)
    eventlog.aborted(_log(job), *_ids(job), table.now, reason)


def memory_hold_reason(job: dict[str, Any]) -> str:
    """The hold reason of a job that went over its memory request."""
    memory = int(job["attrs"].get("RequestMemory", DEFAULT_MEMORY_MB))
    return (
        f"Error from slot1@{hostname()}: Job has gone over cgroup memory limit of {memory} megabytes. "
        f"Last measured usage: {memory + 1} megabytes.  Consider resubmitting with a higher request_memory."
    )


class Hooks:
    """HTCondor's part of the generic job life cycle: event log entries, holds, requeues."""

    def intercept_start(self, table: JobTable, job: dict[str, Any]) -> bool:
        """Apply an injected ``hold-next`` / ``exit-next`` fate when the job would start."""
        fate = job["attrs"].get("_fate")
        if not fate or job.get("num_starts"):
            return False
        if fate["kind"] == "hold":
            hold(
                table,
                job,
                fate.get("reason") or memory_hold_reason(job),
                int(fate.get("code", 34)),
                int(fate.get("subcode", 0)),
            )
            return True
        self.started(table, job)  # the EXECUTE event comes first, as for a job that ran
        table.exit_without_running(job, int(fate.get("code", 1)))
        self.finished(table, job)
        return True

    def started(self, table: JobTable, job: dict[str, Any]) -> None:
        """EXECUTE event."""
        cluster, proc = _ids(job)
        eventlog.executing(
            _log(job),
            cluster,
            proc,
            table.now,
            address("startd"),
            f"slot1@{hostname()}",
            job["cpus"],
            int(job["attrs"].get("RequestMemory", 0)),
        )

    def finished(self, table: JobTable, job: dict[str, Any]) -> None:
        """JOB_TERMINATED event; the job moves to history."""
        cluster, proc = _ids(job)
        eventlog.terminated(
            _log(job),
            cluster,
            proc,
            table.now,
            job.get("exit_code"),
            job.get("signal"),
            job["cpus"],
            int(job["attrs"].get("RequestMemory", 0)),
        )

    def start_failed(self, table: JobTable, job: dict[str, Any], error: StartError) -> None:
        """Like the starter: the job goes on hold with the reason and code of the failure."""
        slot = f"slot1@{hostname()}"
        if error.what == "exec":
            reason = f"Error from {slot}: Failed to execute '{error.path}': {error.strerror} (errno={error.errno})"
        elif error.what == "cwd":
            # HTCondor 25's shadow finds it before any starter runs (a shared file system)
            reason = f"Cannot access initial working directory {error.path}: {error.strerror}"
        else:
            stream = {"stdin": "standard input", "stdout": "standard output", "stderr": "standard error"}[error.what]
            reason = (
                f"Error from {slot}: Failed to open '{error.path}' as {stream}: {error.strerror} (errno {error.errno})"
            )
        hold(table, job, reason, HOLD_CODES[error.what], error.errno)

    def lost(self, table: JobTable, job: dict[str, Any]) -> None:
        """The execute side vanished: the job is evicted and goes back to idle, to run again."""
        table.update(job, status=job_table.PENDING, runner=None, proc=None)
        eventlog.evicted(_log(job), *_ids(job), table.now)


HOOKS = Hooks()
