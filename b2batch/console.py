"""The ``run``, ``status`` and ``cancel`` commands of the ``b2batch`` console script.

``status`` and ``cancel`` read the job folders of a workflow, ``<task_file_dir>/<TaskFamily>/<task_id>/``:
``job.json`` (which task), ``submission.json`` (which batch system has the job under which id, submitted from
which host and steering process), ``exit_code`` and ``result.json`` (written when the job ended). Jobs that
have not ended are looked up with one status query per batch system; ``cancel`` cancels those still queued
or running with one cancel command per batch system.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import socket
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from b2batch import paths
from b2batch.engine.files import JobFiles, job_folders
from b2batch.engine.outcome import JobOutcome, last_outcome
from b2batch.settings import get_setting

#: States of a job that is not over: ``cancel`` cancels these.
ACTIVE = ("queued", "running", "held")

#: Readable words for the batch systems' own job states (the states in their documentation).
NATIVE_WORDS: dict[str, dict[str, str]] = {
    # https://htcondor.readthedocs.io/en/latest/classad-attributes/job-classad-attributes.html (JobStatus)
    "htcondor": {"1": "idle", "2": "running", "3": "removed", "4": "completed", "5": "held",
                 "6": "transferring output", "7": "suspended"},
    # https://www.ibm.com/docs/en/spectrum-lsf/10.1.0?topic=execution-about-job-states
    "lsf": {"PEND": "pending", "PROV": "provisioning", "WAIT": "waiting", "PSUSP": "suspended while pending",
            "RUN": "running", "USUSP": "suspended by its owner", "SSUSP": "suspended by LSF", "DONE": "done",
            "EXIT": "exited", "UNKWN": "unknown (its host lost contact)", "ZOMBI": "zombie"},
    # qstat(1): letters of the state column
    "sge": {"qw": "queued", "hqw": "on hold", "r": "running", "t": "transferring", "Rr": "running (restarted)",
            "Rq": "queued (restarted)", "s": "suspended", "S": "suspended (queue)", "T": "suspended (threshold)",
            "Eqw": "error state", "dr": "being deleted", "dt": "being deleted", "dqw": "being deleted"},
}
#: The scheduler states shown as "held": in the queue, but not going to run until someone acts.
HELD = {("htcondor", "5"), ("sge", "hqw"), ("sge", "Eqw"), ("lsf", "PSUSP")}


@dataclass
class RecordedJob:
    """One job folder and what is known of its job."""

    folder: Path
    task: str
    family: str
    system: str = ""
    job_id: str = ""
    host: str = ""
    steering_pid: int | None = None
    submitted_at: float | None = None
    exit_code: int | None = None
    state: str = "unknown"  # not submitted, queued, running, held, done, pending, failed, cancelled, lost, unknown
    detail: str = ""
    #: The job's journal (submission.json): what the batch system needs beyond the id, e.g. an HTCondor schedd.
    journal: dict[str, Any] = field(default_factory=dict, repr=False)

    def as_dict(self) -> dict[str, Any]:
        return {**{k: v for k, v in asdict(self).items() if k != "journal"}, "folder": str(self.folder)}


def run(script: str, args: list[str]) -> int:
    """Run the workflow script with its arguments, as ``python SCRIPT ARGS`` would (this process becomes it)."""
    if not Path(script).is_file():
        print(f"b2batch run: no workflow script {script}", file=sys.stderr)
        return 2
    os.execv(sys.executable, [sys.executable, script, *args])
    return 0  # not reached


@contextlib.contextmanager
def in_workflow_folder(script: Path) -> Iterator[None]:
    """Settings are looked up as the workflow would when started from its own folder: settings.json files
    from there upward, relative paths relative to it."""
    previous_cwd = os.getcwd()
    os.chdir(script.parent)
    try:
        with paths.base_dir_pinned(str(script.parent)):
            yield
    finally:
        os.chdir(previous_cwd)


def task_file_dir(script: Path, override: str | None = None) -> Path:
    """The workflow's task_file_dir: ``override``, else the settings chain seen from the script's folder
    (settings made in the script's code or on its tasks are not seen: pass ``--task-file-dir`` then)."""
    with in_workflow_folder(script):
        return paths.resolve(override or get_setting("task_file_dir"))


def collect(folder: Path) -> list[RecordedJob]:
    """The jobs in a task_file_dir, with the state their files tell (those not ended: ``unknown``)."""
    jobs = []
    for job_folder in job_folders(folder):
        spec_file = job_folder / "job.json"
        files = JobFiles(folder=job_folder, log_folder=job_folder)
        try:
            spec = json.loads(spec_file.read_text())
        except (OSError, ValueError):
            spec = {}
        family = spec.get("task_family", spec_file.parent.parent.name)  # <family>/<key>/ when the spec is lost
        params = ", ".join(f"{k}={v}" for k, v in (spec.get("task_params") or {}).items())
        job = RecordedJob(folder=spec_file.parent, task=f"{family}({params})", family=family)
        submission = files.read_submission()
        if submission is None:
            job.state, job.detail = "not submitted", "waiting in b2batch, or its submission failed"
            jobs.append(job)
            continue
        job.journal = submission
        job.system, job.job_id = str(submission.get("system", "")), str(submission.get("job_id", ""))
        job.host, job.steering_pid = str(submission.get("host", "")), submission.get("steering_pid")
        job.submitted_at = submission.get("submitted_at")
        ended = last_outcome(files)  # the engine's reading of how the job ended
        if ended is not None:
            job.exit_code = ended.exit_code
            if job.exit_code == 0 and (ended.result or {}).get("status") == "PENDING":
                job.state, job.detail = "pending", "ended with new requirements"
            elif job.exit_code == 0:
                job.state = "done"
            elif ended.cancelled:
                job.state, job.detail = "cancelled", f"{ended.cancelled} (exit code {job.exit_code})"
            else:
                job.state, job.detail = "failed", f"exit code {job.exit_code}"
        jobs.append(job)
    return jobs


def ask_batch_systems(jobs: list[RecordedJob]) -> None:
    """Set the state of each submitted job without an exit code: one status query per batch system."""
    open_jobs: dict[str, list[RecordedJob]] = {}
    for job in jobs:
        if job.state == "unknown" and job.system:
            open_jobs.setdefault(job.system, []).append(job)
    for system, group in open_jobs.items():
        if system in ("local", "test"):  # test: b2luigi's name of local processes
            _local_states(group)
        else:
            _scheduler_states(system, group)


def _scheduler_of(system: str, group: list[RecordedJob], what: str) -> Any:
    """The scheduler ``system`` outside a run, told where each job of ``group`` is (its journal). A plugin
    (a BatchProcess) has no commands b2batch could run to ``what`` its jobs: NotImplementedError."""
    from b2batch.engine import Run
    from b2batch.runconfig import run_config
    from b2batch.systems import system_class
    from b2batch.systems.scheduler import SchedulerSystem

    cls = system_class(system)
    if not issubclass(cls, SchedulerSystem):
        raise NotImplementedError(f"{system} is a plugin that b2batch cannot {what} outside a run")
    scheduler = cls(Run(config=run_config()))
    for job in group:
        scheduler.recall(job.job_id, job.journal)
    return scheduler


def _scheduler_states(system: str, group: list[RecordedJob]) -> None:
    from b2batch.engine import JobStatus
    from b2batch.errors import B2BatchError

    try:
        scheduler = _scheduler_of(system, group, "ask")
        states = scheduler.query_states([job.job_id for job in group])
    except (B2BatchError, NotImplementedError, AttributeError, ValueError) as e:  # ValueError: unreadable output
        for job in group:
            job.detail = f"could not ask {system}: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
        return
    meaning = {JobStatus.idle: "queued", JobStatus.running: "running", JobStatus.successful: "ending",
               JobStatus.aborted: "failed"}
    for job in group:
        native = states.get(job.job_id)
        if native is None:
            job.detail = f"{system} does not list it and it wrote no exit code (lost, or the file is not visible yet)"
            continue
        status = scheduler.state_map.get(native.state)
        job.state = meaning[status] if status is not None else "running"
        if (system, native.state) in HELD:
            job.state = "held"
        job.detail = f"{system}: {native_state_words(system, native.state)}" + (
            f"; {native.reason}" if native.reason else "")


def native_state_words(system: str, state: str) -> str:
    """A batch system's job state in words, with the scheduler's own name of it: ``held (JobStatus 5)``."""
    if system == "slurm":
        return f"{state.lower().replace('_', ' ')} ({state})"
    word = NATIVE_WORDS.get(system, {}).get(state)
    own = f"JobStatus {state}" if system == "htcondor" else state
    return f"{word} ({own})" if word else f"state {own}"


def _local_states(group: list[RecordedJob]) -> None:
    """Local jobs run as processes of this host: running if a process runs the job's wrapper, queued if
    not but the steering process still runs, lost if neither."""
    running = _wrapper_processes(group)
    for job in group:
        if job.host != socket.gethostname():
            job.detail = f"a local job of host {job.host}: ask there"
        elif str(job.folder) in running:
            job.state, job.detail = "running", f"process {running[str(job.folder)].pid}"
        elif _steering_process(job) is not None:
            job.state, job.detail = "queued", f"waits for a slot in steering process {job.steering_pid}"
        elif (cancelled := JobOutcome.read(JobFiles(folder=job.folder, log_folder=job.folder)).cancelled):
            job.state, job.detail = "cancelled", f"{cancelled}, before it started"
        else:
            job.state, job.detail = "lost", "its steering process is gone and it wrote no exit code"


def _wrapper_processes(group: list[RecordedJob]) -> dict[str, Any]:
    """The processes (by job folder) that run the executable wrappers of ``group``."""
    import psutil

    wrappers = {str(job.folder / "executable_wrapper.sh"): str(job.folder) for job in group}
    found = {}
    for process in psutil.process_iter(["cmdline"]):
        try:
            for arg in process.info["cmdline"] or ():
                if arg in wrappers:
                    found[wrappers[arg]] = process
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def _steering_process(job: RecordedJob) -> Any:
    """The job's steering process if it still runs on this host (not another process with its pid)."""
    import psutil

    if job.host != socket.gethostname() or not job.steering_pid:
        return None
    try:
        process = psutil.Process(int(job.steering_pid))
        started_before = job.submitted_at is None or process.create_time() <= float(job.submitted_at) + 1
        return process if started_before and process.status() != psutil.STATUS_ZOMBIE else None
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        return None


# --- the commands --------------------------------------------------------------------------------------------

def last_arguments(script: Path) -> list[str] | None:
    """The script's own arguments in its newest batch run (its report in log_dir), if one is found."""
    with in_workflow_folder(script):
        log_dir = paths.resolve(get_setting("log_dir"))
    reports = sorted(log_dir.glob("b2batch-run-*.report.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    for report in reports:
        try:
            found = json.loads(report.read_text())
        except (OSError, ValueError):
            continue
        if found.get("script") == str(script):
            return [str(arg) for arg in found.get("argv") or []]
    return None


def _place(job_folder: Path, root: Path) -> tuple[str, ...]:
    """Where ``job_folder`` is in the task_file_dir ``root``: its path below it (its last two names if it is not
    below it: ``<family>/<task_id>``)."""
    try:
        return job_folder.resolve().relative_to(root.resolve()).parts
    except ValueError:
        return job_folder.parts[-2:]


def status(script: str, override: str | None = None, as_json: bool = False,
           current: set[Path] | None = None) -> int:
    """Print the jobs of the workflow with their states and the counts per state. ``current``: the job
    folders of the workflow's tasks; jobs in other folders (earlier parameters) are only counted."""
    folder = task_file_dir(Path(script).resolve(), override)
    every = collect(folder)
    if current is not None:  # by the place in the task_file_dir: the same with another one (--task-file-dir)
        own = task_file_dir(Path(script).resolve())
        wanted = {_place(f, own) for f in current}
        jobs = [job for job in every if _place(job.folder, folder) in wanted]
    else:
        jobs = every
    others = len(every) - len(jobs)
    ask_batch_systems(jobs)
    if as_json:
        print(json.dumps([job.as_dict() for job in jobs], indent=1))
        return 0
    more = (f"{others} job folder(s) of other tasks (earlier parameters) not listed: "
            f"b2batch status --all {shlex.quote(script)} lists them too.") if others else ""
    if not jobs:
        print(f"No jobs of the workflow's tasks in {folder}." if others else f"No jobs in {folder}.")
        if more:
            print(more)
        return 0
    print(f"Jobs of {script} in {folder}:")
    table = [["task", "system", "job id", "state", "detail"]]
    table += [[job.task, job.system or "-", job.job_id or "-", job.state, job.detail] for job in jobs]
    for line in _align(table):
        print("  " + line)
    counts = Counter(job.state for job in jobs)
    print(f"{len(jobs)} job(s): " + ", ".join(f"{n} {state}" for state, n in sorted(counts.items())))
    if more:
        print(more)
    return 0


def cancel(script: str, yes: bool = False, override: str | None = None) -> int:
    """Cancel the workflow's queued and running jobs: one cancel command per batch system; local jobs by
    stopping their steering process (which kills its jobs), or the job's processes if it is gone."""
    from b2batch.errors import B2BatchError
    from b2batch.systems import commands

    folder = task_file_dir(Path(script).resolve(), override)
    jobs = collect(folder)
    ask_batch_systems(jobs)
    active = [job for job in jobs if job.state in ACTIVE]
    unasked = [job for job in jobs if job.detail.startswith("could not ask")]
    for job in unasked:
        print(f"  {job.task}: {job.system} job {job.job_id}: {job.detail}", file=sys.stderr)
    if not active:
        print(f"No queued or running jobs in {folder}." if not unasked else
              f"No job known to be queued or running in {folder}; {len(unasked)} could not be asked about.")
        return 1 if unasked else 0
    for job in active:
        print(f"  {job.task}: {job.system} job {job.job_id}, {job.state}")
    if not yes and not confirm(f"Cancel these {len(active)} job(s)?"):
        print("Nothing cancelled (pass --yes to cancel without asking).")
        return 1
    by_system: dict[str, list[RecordedJob]] = {}
    for job in active:
        by_system.setdefault(job.system, []).append(job)
    failures = 0
    for system, group in by_system.items():
        if system in ("local", "test"):  # test: b2luigi's name of local processes
            failures += _cancel_local(group)
            continue
        try:
            cancel_commands = _scheduler_of(system, group, "cancel").cancel_commands([job.job_id for job in group])
        except (B2BatchError, NotImplementedError) as e:
            print(f"{system}: could not cancel: {e}", file=sys.stderr)
            failures += 1
            continue
        for command in cancel_commands:
            try:
                done = commands.run(command, check=False)
            except B2BatchError as e:
                print(f"{system}: could not cancel: {e}", file=sys.stderr)
                failures += 1
                continue
            output = (done.stdout + done.stderr).strip()
            print(f"{system}: {shlex.join(command)}" + (f"\n{output}" if output else ""))
            if done.returncode != 0:
                print(f"{system}: the cancel command exited with {done.returncode}", file=sys.stderr)
                failures += 1
    print(f"Cancelled {len(active)} job(s)." if not failures else "Some jobs could not be cancelled.")
    return 1 if failures else 0


def _cancel_local(group: list[RecordedJob]) -> int:
    """Local jobs live in their steering process's pool: stop it (SIGTERM, as Ctrl-C: it kills its jobs and
    says so); kill the processes of jobs whose steering process is gone. How many could not be stopped."""
    import psutil

    steering = {p.pid: p for p in (_steering_process(job) for job in group) if p is not None}
    for pid, process in steering.items():
        print(f"local: stopping steering process {pid} (SIGTERM); it kills its jobs")
        with contextlib.suppress(psutil.NoSuchProcess):
            process.terminate()
    alive = _wait_for_end(list(steering.values()), timeout=30)
    for process in alive:
        print(f"local: steering process {process.pid} did not stop within 30 s", file=sys.stderr)
    orphans = [job for job in group if job.steering_pid not in steering and job.host == socket.gethostname()]
    for folder, process in _wrapper_processes(orphans).items():
        print(f"local: killing the job in {folder} (process {process.pid} and its children)")
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if os.getpgid(process.pid) == process.pid:
                os.killpg(process.pid, signal.SIGTERM)
            else:
                process.terminate()
    return len(alive)


def _wait_for_end(processes: list[Any], timeout: float) -> list[Any]:
    """Wait until the processes are over (ended, or zombies their parent has not reaped); those that are not."""
    import psutil

    def over(process: Any) -> bool:
        try:
            return process.status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    deadline = time.monotonic() + timeout
    alive = list(processes)
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = [p for p in alive if not over(p)]
    return alive


def _align(table: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in table]


def confirm(question: str) -> bool:
    """Ask a yes/no question on the terminal; no answer (or no stdin) is no."""
    try:
        answer = input(f"{question} [y/N] ")
    except EOFError:
        answer = ""
    return answer.strip().lower() in ("y", "yes")
