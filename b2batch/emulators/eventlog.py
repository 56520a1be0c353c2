"""HTCondor job event log (the submit file's ``log =``) in the real text format.

Each event is ``NNN (cluster.proc.subproc) YYYY-MM-DD HH:MM:SS text`` plus indented detail lines and a
``...`` terminator; ``htcondor2.JobEventLog`` reads what this module writes.
"""

from __future__ import annotations

import logging
import time

logger = logging.getLogger(__name__)

SUBMIT = 0
EXECUTE = 1
JOB_EVICTED = 4
JOB_TERMINATED = 5
JOB_ABORTED = 9
JOB_HELD = 12
JOB_RELEASED = 13

_USAGE = "Usr 0 00:00:00, Sys 0 00:00:00"


def _header(code: int, cluster: int, proc: int, when: float, text: str) -> str:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(when))
    return f"{code:03d} ({cluster:03d}.{proc:03d}.000) {stamp} {text}\n"


def append(path: str | None, code: int, cluster: int, proc: int, when: float, text: str, body: list[str]) -> None:
    """Append one event to the log at ``path`` (no-op without a log); failures are logged, not raised."""
    if not path:
        return
    event = _header(code, cluster, proc, when, text) + "".join(f"\t{line}\n" for line in body) + "...\n"
    try:
        with open(path, "a") as handle:
            handle.write(event)
    except OSError as exc:
        logger.warning("Job %d.%d: cannot write event log %s: %s", cluster, proc, path, exc)


def submitted(path: str | None, cluster: int, proc: int, when: float, address: str) -> None:
    """SUBMIT (000)."""
    append(path, SUBMIT, cluster, proc, when, f"Job submitted from host: {address}", [])


def executing(
    path: str | None, cluster: int, proc: int, when: float, address: str, slot: str, cpus: int, memory: int
) -> None:
    """EXECUTE (001)."""
    body = [f"SlotName: {slot}", f"Cpus = {cpus}", f"Memory = {memory}"]
    append(path, EXECUTE, cluster, proc, when, f"Job executing on host: {address}", body)


def terminated(
    path: str | None,
    cluster: int,
    proc: int,
    when: float,
    exit_code: int | None,
    signal: int | None,
    cpus: int,
    memory: int,
) -> None:
    """JOB_TERMINATED (005): normal termination with a return value, or abnormal by a signal."""
    if signal is not None:
        body = [f"(0) Abnormal termination (signal {signal})", "(0) No core file"]
    else:
        body = [f"(1) Normal termination (return value {exit_code or 0})"]
    body += [
        f"\t{_USAGE}  -  Run Remote Usage",
        f"\t{_USAGE}  -  Run Local Usage",
        f"\t{_USAGE}  -  Total Remote Usage",
        f"\t{_USAGE}  -  Total Local Usage",
        "0  -  Run Bytes Sent By Job",
        "0  -  Run Bytes Received By Job",
        "0  -  Total Bytes Sent By Job",
        "0  -  Total Bytes Received By Job",
        "Partitionable Resources :    Usage  Request Allocated ",
        f"   Cpus                 :           {cpus:9d} {cpus:9d} ",
        f"   Memory (MB)          :        0 {memory:8d} {memory:9d} ",
    ]
    append(path, JOB_TERMINATED, cluster, proc, when, "Job terminated.", body)


def aborted(path: str | None, cluster: int, proc: int, when: float, reason: str) -> None:
    """JOB_ABORTED (009)."""
    append(path, JOB_ABORTED, cluster, proc, when, "Job was aborted.", [reason])


def held(path: str | None, cluster: int, proc: int, when: float, reason: str, code: int, subcode: int) -> None:
    """JOB_HELD (012)."""
    append(path, JOB_HELD, cluster, proc, when, "Job was held.", [reason, f"Code {code} Subcode {subcode}"])


def released(path: str | None, cluster: int, proc: int, when: float, reason: str) -> None:
    """JOB_RELEASED (013)."""
    append(path, JOB_RELEASED, cluster, proc, when, "Job was released.", [reason])


def evicted(path: str | None, cluster: int, proc: int, when: float, reason: str = "") -> None:
    """JOB_EVICTED (004): the job lost its execute slot and goes back to idle, or (``reason``: condor_rm's) is
    removed while it runs (HTCondor 25 writes this event before the abort event then)."""
    body = [
        "(0) Job was not checkpointed." if not reason else "(0) CPU times",
        f"\t{_USAGE}  -  Run Remote Usage",
        f"\t{_USAGE}  -  Run Local Usage",
        "0  -  Run Bytes Sent By Job",
        "0  -  Run Bytes Received By Job",
    ]
    if reason:
        body.append(f"Reason: {reason}")
    append(path, JOB_EVICTED, cluster, proc, when, "Job was evicted." if not reason else
           "Job was evicted. Code 1023 Subcode 0", body)
