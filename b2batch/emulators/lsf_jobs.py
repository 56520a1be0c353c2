"""LSF jobs: array specs, ``bjobs -o`` fields of a job record, the job report, and the life cycle.

Job ids are ``"123"`` for a plain job and ``"123[4]"`` for element 4 of array job 123 (``group`` is
``"123"`` for both). Finished jobs report ``DONE`` (exit 0) or ``EXIT`` with ``EXIT_CODE``; a job
killed by a signal reports 128 + signal, one that hit its run limit (``bsub -W``) exit code 140.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

from b2batch.emulators import nodes, job_table
from b2batch.emulators.common import current_user, hostname
from b2batch.emulators.slots import StartError
from b2batch.emulators.job_table import JobTable

_ARRAY = re.compile(r"^(?P<name>[^\[\]]*)\[(?P<spec>[^\]]+)\]$")
_RANGE = re.compile(r"^(\d+)(?:-(\d+)(?::(\d+))?)?$")
CLUSTER = "b2batch_emulated"
RUNLIMIT_EXIT_CODE = 140


class ArraySpecError(ValueError):
    """A ``-J "name[...]"`` index list LSF would reject."""


def parse_array(job_name: str) -> tuple[str, list[int], int | None]:
    """``name[1-10:2,15%3]`` -> (``name``, indices, running-element limit); plain names give no indices."""
    match = _ARRAY.match(job_name)
    if not match:
        return job_name, [], None
    spec, limit = match.group("spec"), None
    if "%" in spec:
        spec, limit_text = spec.rsplit("%", 1)
        if not limit_text.isdigit() or int(limit_text) < 1:
            raise ArraySpecError(job_name)
        limit = int(limit_text)
    indices: list[int] = []
    for part in spec.split(","):
        found = _RANGE.match(part.strip())
        if not found:
            raise ArraySpecError(job_name)
        start = int(found.group(1))
        stop = int(found.group(2) or start)
        step = int(found.group(3) or 1)
        if start < 1 or stop < start:
            raise ArraySpecError(job_name)
        indices.extend(range(start, stop + 1, step))
    return match.group("name"), sorted(dict.fromkeys(indices)), limit


def lsf_time(when: float | None, suffix: str = "") -> str:
    """A time as bjobs prints it (``Nov 22 04:30``), empty when unknown."""
    if not when:
        return ""
    return time.strftime("%b %d %H:%M", time.localtime(when)) + suffix


def stat(job: dict[str, Any]) -> str:
    """The LSF STAT of a job record."""
    status = job["status"]
    if status in (job_table.PENDING, job_table.STARTING):
        return "PEND"
    if status == job_table.RUNNING:
        return "RUN"
    if status == job_table.HELD:
        return "PSUSP"
    if status == job_table.LOST:
        return str(job.get("lost_as") or "UNKWN")
    if status == job_table.EXITED and job.get("exit_code") == 0 and job.get("signal") is None:
        return "DONE"
    return "EXIT"


def exit_code(job: dict[str, Any]) -> str:
    """EXIT_CODE: empty unless the job exited non-zero (signals count as 128 + signal)."""
    if stat(job) != "EXIT":
        return ""
    if job.get("signal") is not None:
        return str(128 + int(job["signal"]))
    return "" if job.get("exit_code") is None else str(job["exit_code"])


def _exit_reason(job: dict[str, Any]) -> str:
    if job["status"] == job_table.REMOVED:
        return "TERM_OWNER: job killed by owner"
    if job.get("reason") == "runlimit":
        return "TERM_RUNLIMIT: job killed after reaching LSF run time limit"
    if job["status"] == job_table.EXITED and job.get("reason"):
        return str(job["reason"])
    return ""


def _run_time(job: dict[str, Any], now: float) -> str:
    if not job.get("start_time"):
        return "0 second(s)"
    end = job.get("end_time") if job["status"] != job_table.RUNNING else None
    return f"{int((end or now) - job['start_time'])} second(s)"


def _cpu_used(job: dict[str, Any]) -> str:
    """CPU_USED as bjobs prints it (``1.2 second(s)``); known once the job ended here."""
    if job.get("cpu_user") is None:
        return "0.0 second(s)" if job.get("start_time") else ""
    return f"{float(job['cpu_user']) + float(job.get('cpu_sys') or 0):.1f} second(s)"


def _memlimit(value: str | None) -> str:
    """MEMLIMIT with its unit, as bjobs prints it (``2000 M``): ``bsub -M 2000`` counts in MB here (the
    emulated cluster's LSF_UNIT_FOR_LIMITS=MB), ``-M 2GB`` as written."""
    if not value:
        return ""
    found = re.fullmatch(r"\s*([0-9.]+)\s*([KMGT]?)B?\s*", str(value), re.IGNORECASE)
    if not found:
        return str(value)
    return f"{found.group(1)} {(found.group(2) or 'M').upper()}"


def _max_mem(job: dict[str, Any]) -> str:
    """MAX_MEM as bjobs prints it (``300 Mbytes``), empty until the job ended here."""
    if job.get("max_rss_kb") is None:
        return ""
    return f"{max(1, round(int(job['max_rss_kb']) / 1024))} Mbytes"


FIELDS: dict[str, Callable[[dict[str, Any], float], str]] = {
    "jobid": lambda j, n: j["id"],
    "jobindex": lambda j, n: str(j["attrs"].get("index", 0)),
    "stat": lambda j, n: stat(j),
    "user": lambda j, n: j["attrs"]["user"],
    "queue": lambda j, n: j["attrs"]["queue"],
    "job_name": lambda j, n: j["attrs"]["name"],
    "exit_code": lambda j, n: exit_code(j),
    "exec_host": lambda j, n: nodes.node_of(j) if j.get("start_time") else "",
    "from_host": lambda j, n: j["attrs"]["from_host"],
    "submit_time": lambda j, n: lsf_time(j["submit_time"]),
    "start_time": lambda j, n: lsf_time(j.get("start_time")),
    "finish_time": lambda j, n: lsf_time(j.get("end_time"), " L") if stat(j) in ("DONE", "EXIT") else "",
    "exit_reason": lambda j, n: _exit_reason(j),
    "kill_reason": lambda j, n: "job killed by owner" if j["status"] == job_table.REMOVED else "",
    "suspend_reason": lambda j, n: "The job was suspended by user" if j["status"] == job_table.HELD else "",
    "pend_reason": lambda j, n: "Job slot limit reached" if stat(j) == "PEND" else "",
    "slots": lambda j, n: str(j["cpus"]),
    "nreq_slot": lambda j, n: str(j["cpus"]),
    "command": lambda j, n: j["attrs"]["command"],
    "sub_cwd": lambda j, n: j["attrs"]["cwd"],
    "exec_cwd": lambda j, n: j["attrs"]["cwd"] if j.get("start_time") else "",
    "output_file": lambda j, n: j["attrs"].get("output") or "",
    "error_file": lambda j, n: j["attrs"].get("error") or "",
    "run_time": _run_time,
    "runtimelimit": lambda j, n: j["attrs"].get("runlimit") or "",
    "memlimit": lambda j, n: _memlimit(j["attrs"].get("memlimit")),
    "effective_resreq": lambda j, n: j["attrs"].get("resreq") or "",
    "combined_resreq": lambda j, n: j["attrs"].get("resreq") or "",
    "project": lambda j, n: j["attrs"].get("project") or "default",
    "cpu_used": lambda j, n: _cpu_used(j),
    "max_mem": lambda j, n: _max_mem(j),
}
ALIASES = {"id": "jobid", "name": "job_name", "st": "stat", "exit": "exit_code", "index": "jobindex"}
DEFAULT_FIELDS = ("jobid", "user", "stat", "queue", "from_host", "exec_host", "job_name", "submit_time")


def field_name(name: str) -> str:
    """Canonical lower-case field name; raises KeyError for fields bjobs does not know here."""
    lower = name.lower()
    lower = ALIASES.get(lower, lower)
    if lower not in FIELDS:
        raise KeyError(name)
    return lower


def _stamp(when: float | None) -> str:
    return time.strftime("%a %b %d %H:%M:%S %Y", time.localtime(when or time.time()))


def job_report(job: dict[str, Any]) -> str:
    """The job summary LSF appends to a job's ``-o`` file when the job ends."""
    attrs, user, host = job["attrs"], job["attrs"]["user"], hostname()
    code = exit_code(job)
    if stat(job) == "DONE":
        verdict = "Successfully completed."
    else:
        reason = _exit_reason(job)
        verdict = (f"{reason}.\n" if reason else "") + f"Exited with exit code {code}."
    outcome = "Done" if stat(job) == "DONE" else "Exited"
    started, ended = _stamp(job.get("start_time")), _stamp(job.get("end_time"))
    run_seconds = int((job.get("end_time") or 0) - (job.get("start_time") or 0))
    lines = [
        "",
        "------------------------------------------------------------",
        f"Sender: LSF System <lsfadmin@{host}>",
        f"Subject: Job {job['id']}: <{attrs['name']}> in cluster <{CLUSTER}> {outcome}",
        "",
        (
            f"Job <{attrs['name']}> was submitted from host <{attrs['from_host']}> by user <{user}> "
            f"in cluster <{CLUSTER}> at {_stamp(job['submit_time'])}"
        ),
        (
            f"Job was executed on host(s) <{host}>, in queue <{attrs['queue']}>, as user <{user}> "
            f"in cluster <{CLUSTER}> at {started}"
        ),
        f"<{attrs['cwd']}> was used as the working directory.",
        f"Started at {started}",
        f"Terminated at {ended}",
        f"Results reported at {ended}",
        "",
        "Your job looked like:",
        "",
        "------------------------------------------------------------",
        "# LSBATCH: User input",
        attrs["command"],
        "------------------------------------------------------------",
        "",
        verdict,
        "",
        "Resource usage summary:",
        "",
        f"    Run time :                                   {run_seconds} sec.",
        "",
        "The output (if any) is above this job summary.",
        "",
    ]
    if attrs.get("error") and attrs.get("error") != attrs.get("output"):
        lines += ["", "PS:", "", f"Read file <{attrs['error']}> for stderr output of this job.", ""]
    return "\n".join(lines) + "\n"


class Hooks:
    """LSF's part of the generic job life cycle: job reports, injected exits, lost hosts."""

    def node_failed(self, table: JobTable, job: dict[str, Any]) -> None:
        """The job started on a bad node (``inject lsf bad-node``): it exits at once with code 1, unrun."""
        table.exit_without_running(job, 1)
        self.finished(table, job)

    def intercept_start(self, table: JobTable, job: dict[str, Any]) -> bool:
        """Apply an injected ``exit-next`` fate: the job ends with that exit code without running."""
        fate = job["attrs"].get("_fate")
        if not fate or job.get("num_starts"):
            return False
        table.exit_without_running(job, int(fate.get("code", 1)))
        if fate.get("reason"):  # e.g. TERM_MEMLIMIT: bjobs shows it as the job's EXIT_REASON
            table.update(job, reason=str(fate["reason"]))
        self.finished(table, job)
        return True

    def started(self, table: JobTable, job: dict[str, Any]) -> None:
        """Nothing to record: bjobs shows RUN from the record."""

    def finished(self, table: JobTable, job: dict[str, Any]) -> None:
        """Apply the run-limit exit code and append the job report to the output file."""
        if job.get("reason") == "runlimit":
            table.update(job, exit_code=RUNLIMIT_EXIT_CODE, signal=None)
        output = job["attrs"].get("output")
        if output:
            try:
                with open(output, "a") as handle:
                    handle.write(job_report(job))
            except OSError:
                pass

    def start_failed(self, table: JobTable, job: dict[str, Any], error: StartError) -> None:
        """The job could not start: it exits with the shell's code for the failure."""
        code = 127 if error.what == "exec" else 1
        table.update(
            job,
            status=job_table.EXITED,
            start_time=table.now,
            end_time=table.now,
            exit_code=code,
            reason=f"{error.path}: {error.strerror}",
        )

    def lost(self, table: JobTable, job: dict[str, Any]) -> None:
        """The execution host went away: the job exits (no exit code is known)."""
        table.update(
            job,
            status=job_table.EXITED,
            end_time=table.now,
            exit_code=None,
            signal=9,
            reason="TERM_HOST_LOST: job killed after the execution host went down",
            runner=None,
            proc=None,
        )


def new_attrs(name: str, queue: str, cwd: str, command: str, index: int) -> dict[str, Any]:
    """The static attributes of one LSF job record."""
    return {
        "name": name,
        "queue": queue,
        "cwd": cwd,
        "command": command,
        "index": index,
        "user": current_user(),
        "from_host": hostname(),
    }


HOOKS = Hooks()
