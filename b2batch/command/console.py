"""The ``run``, ``status`` and ``cancel`` commands of the ``b2batch`` console script.

``status`` and ``cancel`` read the job folders of a workflow and the work queues of its pilots and bundles
(:mod:`b2batch.display.jobstates`): the state of each task, whatever its job shape. ``cancel`` cancels what is
queued or running, pilot and bundle jobs too, with one cancel command per batch system, after a note that tells
the steering process that they were cancelled on purpose (it fails their tasks, and ends with its summary).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from b2batch.jobscript import base_folder
from b2batch.display.jobstates import (ACTIVE, RecordedJob, ask_batch_systems, collect, scheduler_of,
                                       steering_process, wrapper_processes)
from b2batch.display.queues import QueueViews, age
from b2batch.settings import get_setting
from b2batch.engine.processes import host_name


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
        with base_folder.base_dir_pinned(str(script.parent)):
            yield
    finally:
        os.chdir(previous_cwd)


def task_file_dir(script: Path, override: str | None = None) -> Path:
    """The workflow's task_file_dir: ``override``, else the settings chain seen from the script's folder
    (settings made in the script's code or on its tasks are not seen: pass ``--task-file-dir`` then)."""
    with in_workflow_folder(script):
        return base_folder.resolve(override or get_setting("task_file_dir"))



# --- the commands --------------------------------------------------------------------------------------------

def last_arguments(script: Path) -> list[str] | None:
    """The script's own arguments in its newest batch run, running or ended (its live state or its report in
    log_dir), if one is found."""
    with in_workflow_folder(script):
        log_dir = base_folder.resolve(get_setting("log_dir"))
    found = [*log_dir.glob("b2batch-run-*.report.json"), *log_dir.glob("b2batch-live-*.json")]
    for record in sorted(found, key=_started, reverse=True):
        try:
            run = json.loads(record.read_text())
        except (OSError, ValueError):
            continue
        if run.get("script") == str(script):
            return [str(arg) for arg in run.get("argv") or []]
    return None


def _started(path: Path) -> float:
    """When the run of a report or live state began, from its name's time stamp (else its file's mtime)."""
    stamp = path.name.removeprefix("b2batch-run-").removeprefix("b2batch-live-")[:15]
    try:
        return time.mktime(time.strptime(stamp, "%Y%m%d-%H%M%S"))
    except ValueError:
        try:
            return path.stat().st_mtime
        except OSError:
            return 0.0


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
    workers = ask_batch_systems(jobs)
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
    for line in _worker_lines(workers):
        print(line)
    if more:
        print(more)
    return 0


def _worker_lines(workers: list[RecordedJob]) -> list[str]:
    """A line per kind of worker job and batch system: how many run (with their ids and nodes), wait, ended."""
    groups: dict[tuple[str, str], list[RecordedJob]] = {}
    for worker in workers:
        groups.setdefault((worker.carrier, worker.system), []).append(worker)
    lines = []
    for (kind, system), group in sorted(groups.items()):
        by_state: dict[str, list[str]] = {}
        for worker in group:
            where = f" on {worker.node} for {age(worker.since)}" if worker.state == "running" and worker.node else ""
            by_state.setdefault(worker.state, []).append(f"{worker.job_id or '?'}{where}")
        said = "; ".join(f"{len(ids)} {state} ({', '.join(ids[:6])}{', ...' if len(ids) > 6 else ''})"
                         for state, ids in sorted(by_state.items(), reverse=True))
        lines.append(f"{kind.capitalize()} jobs on {system}: {said}")
    return lines


def cancel(script: str, yes: bool = False, override: str | None = None) -> int:
    """Cancel the workflow's queued and running jobs, its pilot and bundle jobs too, with one cancel command per
    batch system; local jobs by stopping their steering process (which kills its jobs), or the job's processes if
    it is gone. The jobs and work queues get a note first (:data:`CANCELLED`): the steering process fails their
    tasks as cancelled instead of submitting them again, and ends with its summary."""
    folder = task_file_dir(Path(script).resolve(), override)
    active, in_queues, views, unasked = _active(folder)
    for job in unasked:
        print(f"  {job.task}: {job.system} job {job.job_id or '?'}: {job.detail}", file=sys.stderr)
    if not active:
        print(f"No queued or running jobs in {folder}." if not unasked else
              f"No job known to be queued or running in {folder}; {len(unasked)} could not be asked about.")
        if in_queues:
            print(f"{len(in_queues)} task(s) wait in a pilot or bundle queue that no job serves now.")
        return 1 if unasked else 0
    for job in active:
        print("  " + _active_line(job, in_queues))
    if in_queues:
        print(f"  ({len([j for j in in_queues if j.state == 'queued'])} task(s) wait for these pilot or bundle jobs)")
    if not yes and not confirm(f"Cancel these {len(active)} job(s)?"):
        print("Nothing cancelled (pass --yes to cancel without asking).")
        return 1
    _note_cancel([job for job in active if job.carrier], in_queues, views)
    failures = _cancel_with_commands(active)
    print(f"Cancelled {len(active)} job(s)." if not failures else "Some jobs could not be cancelled.")
    return 1 if failures else 0


#: Why the jobs that ``cancel`` cancels ended (their note, and the reason their tasks fail with).
CANCELLED = "cancelled with b2batch cancel"


def _active(folder: Path) -> tuple[list[RecordedJob], list[RecordedJob], QueueViews, list[RecordedJob]]:
    """The jobs of ``folder`` that are queued or running (jobs of their own, pilot and bundle jobs), the tasks
    that wait or run in pilots or bundles, the work queues, and the jobs whose batch system could not be asked."""
    jobs = collect(folder)
    views = QueueViews()
    views.add_all(folder)
    workers = ask_batch_systems(jobs, views)
    active = [job for job in [*jobs, *workers] if job.state in ACTIVE and not job.queue]
    in_queues = [job for job in jobs if job.queue and job.state in ("queued", "running")]
    unasked = [job for job in [*jobs, *workers] if job.detail.startswith("could not ask")]
    return active, in_queues, views, unasked


def _active_line(job: RecordedJob, in_queues: list[RecordedJob]) -> str:
    """How ``cancel`` lists a job: a task's own, or a pilot or bundle job with the tasks it runs."""
    ident = f"{job.system} job {job.job_id}" if job.job_id else f"{job.system} job (no id yet)"
    if not job.carrier:
        return f"{job.task}: {ident}, {job.state}"
    running = [task.task for task in in_queues if task.state == "running" and task.job_id == job.job_id]
    line = f"{job.carrier} {ident}, {job.state}" + (f" on {job.node}" if job.node else "")
    return line + (f", running {', '.join(running)}" if running else "")


def _note_cancel(workers: list[RecordedJob], in_queues: list[RecordedJob], views: QueueViews) -> None:
    """Tell the steering processes that their pilot and bundle jobs and the tasks in them are cancelled on
    purpose: a note in each job folder and each work queue (it fails their tasks instead of running them again)."""
    from b2batch.engine.files import JobFiles

    for job in [*workers, *in_queues]:
        JobFiles(folder=job.folder, log_folder=job.folder).record_cancel(CANCELLED)
    for view in views.views.values():
        if view.live_workers() or view.waiting:
            view.cancel_all(CANCELLED)


def _cancel_with_commands(active: list[RecordedJob]) -> int:
    """Cancel ``active`` with one cancel command per batch system (local jobs: stop their steering process or
    kill their processes); how many commands failed for jobs that were still queued or running."""
    from b2batch.errors import B2BatchError
    from b2batch.systems import command_runner

    by_system: dict[str, list[RecordedJob]] = {}
    for job in active:
        by_system.setdefault(job.system, []).append(job)
    failures = 0
    for system, group in by_system.items():
        if system in ("local", "test"):  # test: b2luigi's name of local processes
            failures += _cancel_local(group)
            continue
        try:
            cancel_commands = scheduler_of(system, group, "cancel").cancel_commands([job.job_id for job in group])
        except (B2BatchError, NotImplementedError) as e:
            print(f"{system}: could not cancel: {e}", file=sys.stderr)
            failures += 1
            continue
        for command in cancel_commands:
            try:
                done = command_runner.run(command, check=False)
            except B2BatchError as e:
                print(f"{system}: could not cancel: {e}", file=sys.stderr)
                failures += 1
                continue
            output = (done.stdout + done.stderr).strip()
            print(f"{system}: {shlex.join(command)}" + (f"\n{output}" if output else ""))
            if done.returncode != 0 and _still_active(group):
                print(f"{system}: the cancel command exited with {done.returncode}", file=sys.stderr)
                failures += 1
    return failures


def _still_active(group: list[RecordedJob]) -> bool:
    """Whether any job of ``group`` is still queued or running (a cancel command fails for jobs that ended
    meanwhile: that is no failure)."""
    again = [RecordedJob(folder=job.folder, task=job.task, family=job.family, system=job.system, job_id=job.job_id,
                         host=job.host, steering_pid=job.steering_pid, journal=job.journal) for job in group]
    ask_batch_systems(again)
    return any(job.state in ACTIVE for job in again)


def _cancel_local(group: list[RecordedJob]) -> int:
    """Local jobs live in their steering process's pool: stop it (SIGTERM, as Ctrl-C: it kills its jobs and
    says so); kill the processes of jobs whose steering process is gone. How many could not be stopped."""
    import psutil

    steering = {p.pid: p for p in (steering_process(job) for job in group) if p is not None}
    for pid, process in steering.items():
        print(f"local: stopping steering process {pid} (SIGTERM); it kills its jobs")
        with contextlib.suppress(psutil.NoSuchProcess):
            process.terminate()
    alive = _wait_for_end(list(steering.values()), timeout=30)
    for process in alive:
        print(f"local: steering process {process.pid} did not stop within 30 s", file=sys.stderr)
    orphans = [job for job in group if job.steering_pid not in steering and job.host == host_name()]
    for folder, process in wrapper_processes(orphans).items():
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
