"""The jobs of a workflow as ``b2batch status`` and ``b2batch cancel`` see them, from its task_file_dir.

A job folder (``<task_file_dir>/.../<task>/``) holds ``job.json`` (which task), ``submission.json`` (which batch
system has the job under which id, submitted from which host and steering process; for a task in a pilot or
bundle, its work queue and unit there), ``exit_code`` and ``result.json`` (written when the job ended). Jobs
that have not ended are looked up with one status query per batch system, together with the pilot and bundle
jobs of the work queues (:mod:`b2batch.display.queues`); a task in a pilot takes its state from its queue and
from its pilot's batch job.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from b2batch.display.intended import find_intended, take_intent
from b2batch.display.queues import QueueViews, UnitState, WorkerJob, age
from b2batch.engine.files import JobFiles, job_folders
from b2batch.engine.outcome import JobOutcome, last_outcome
from b2batch.engine.processes import host_name, noted_process

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
    #: A task in a pilot or bundle: its work queue and unit there, and the kind of job that runs it.
    queue: str = ""
    unit: str = ""
    carrier: str = ""
    #: The node it runs on, and since when (epoch seconds), where known.
    node: str = ""
    since: float | None = None

    def as_dict(self) -> dict[str, Any]:
        found = {**{k: v for k, v in asdict(self).items() if k != "journal"}, "folder": str(self.folder)}
        found["running_for"] = round(time.time() - self.since, 1) if self.since and self.state == "running" else None
        return found



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
        if take_intent(job, files):  # its steering process was stopped while it submitted the job
            jobs.append(job)
            continue
        if submission is None:
            job.state, job.detail = "not submitted", "waiting in b2batch, or its submission failed"
            jobs.append(job)
            continue
        job.journal = submission
        job.system, job.job_id = str(submission.get("system", "")), str(submission.get("job_id", ""))
        job.host, job.steering_pid = str(submission.get("host", "")), submission.get("steering_pid")
        job.submitted_at = submission.get("submitted_at")
        job.queue, job.unit = str(submission.get("queue", "")), str(submission.get("unit", ""))
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


def ask_batch_systems(jobs: list[RecordedJob], views: QueueViews | None = None) -> list[RecordedJob]:
    """Set the state of each submitted job without an exit code: one status query per batch system for the
    jobs of their own and the live pilot and bundle jobs of the work queues in ``views`` (and of those the tasks
    are in); a task in a pilot or bundle takes its state from its queue and its worker job. The worker jobs,
    with their states."""
    views = views if views is not None else QueueViews()
    for job in jobs:
        if job.queue:
            views.view(job.queue)
    workers = [_worker_record(worker) for worker in views.live_workers()]
    open_jobs: dict[str, list[RecordedJob]] = {}
    for job in [*jobs, *workers]:
        if job.state == "unknown" and job.system and not job.queue:
            open_jobs.setdefault(job.system, []).append(job)
    for system, group in open_jobs.items():
        if system in ("local", "test"):  # test: b2luigi's name of local processes
            _local_states(group)
        else:
            _scheduler_states(system, find_intended(system, group, scheduler_of))
    for worker in workers:
        if worker.state in ("failed", "unknown", "lost") and (
                cancelled := JobOutcome.read(JobFiles(folder=worker.folder, log_folder=worker.folder)).cancelled):
            worker.state, worker.detail = "cancelled", cancelled
    by_folder = {str(worker.folder): worker for worker in workers}
    for job in jobs:
        if job.queue:
            view = views.view(job.queue)
            job.carrier = view.kind
            _unit_state(job, view.unit(job.unit), by_folder, [by_folder[str(w.folder)] for w in view.live_workers()])
    return workers


def _worker_record(worker: WorkerJob) -> RecordedJob:
    """A pilot or bundle job as a recorded job of its own (state unknown until asked)."""
    journal = worker.journal
    found = RecordedJob(folder=worker.folder, task=f"{worker.kind} job", family=worker.kind, system=worker.system,
                        job_id=worker.job_id, host=str(journal.get("host", "")),
                        steering_pid=journal.get("steering_pid"), submitted_at=journal.get("submitted_at"),
                        journal=journal, carrier=worker.kind)
    found.node = str(worker.beat.get("host", ""))
    found.since = worker.beat.get("started")
    return found


def _unit_state(job: RecordedJob, where: UnitState, workers: dict[str, RecordedJob],
                queue_workers: list[RecordedJob]) -> None:
    """The state of a task in a pilot or bundle from its place in the queue and its worker job's state."""
    if where.job_id:
        job.job_id = where.job_id  # the batch job that runs (or ran) it: the scheduler's id
    if job.state != "unknown":
        return  # it wrote its exit code
    kind = job.carrier
    if where.where == "running":
        worker = workers.get(str(where.worker.folder)) if where.worker is not None else None
        job.node, job.since = where.node or (worker.node if worker else ""), where.since
        runs = f"in {kind} job {job.job_id or '?'}" + (f" on {job.node}" if job.node else "") + \
            f" for {age(where.since)}"
        if worker is not None and worker.state in ("done", "failed", "cancelled", "lost"):
            job.state = "lost"
            job.detail = (f"its {kind} job {job.job_id} ended while running it ({worker.state}"
                          f"{': ' + worker.detail if worker.detail else ''}); its steering process runs it again")
        else:
            job.state, job.detail = "running", runs
            if worker is not None and worker.detail.startswith("could not ask"):
                job.detail += f" ({worker.detail})"
    elif where.where == "waiting":
        job.state, job.detail = "queued", _waiting_detail(kind, queue_workers)
    elif where.where == "ended":
        job.state, job.detail = "ending", f"its run in {kind} job {job.job_id or '?'} ended; no exit code seen yet"
    elif (cancelled := JobOutcome.read(JobFiles(folder=job.folder, log_folder=job.folder)).cancelled):
        job.state, job.detail = "cancelled", f"{cancelled}, before it ran"
    else:
        job.detail = (f"not in its {kind} queue and it wrote no exit code (taken back by its steering process, "
                      f"or lost)")


def _waiting_detail(kind: str, workers: list[RecordedJob]) -> str:
    """What a task that waits in a queue waits for: the queue's worker jobs that run or wait, by state."""
    by_state: dict[str, list[str]] = {}
    for worker in workers:
        if worker.state in ACTIVE or worker.state == "unknown":
            by_state.setdefault(worker.state, []).append(worker.job_id or "?")
    if not by_state:
        return f"waits for a {kind} job; none of its queue is queued or running (its steering process submits one)"
    said = "; ".join(f"{_ids(ids)} {state}" for state, ids in sorted(by_state.items(), reverse=True))
    return f"waits for a {kind} job ({kind} jobs of its queue: {said})"


def _ids(ids: list[str], most: int = 4) -> str:
    shown = ", ".join(ids[:most])
    return shown + (f" and {len(ids) - most} more" if len(ids) > most else "")


def scheduler_of(system: str, group: list[RecordedJob], what: str) -> Any:
    """The scheduler ``system`` outside a run, told where each job of ``group`` is (its journal). A plugin
    (a BatchProcess) has no commands b2batch could run to ``what`` its jobs: NotImplementedError."""
    from b2batch.engine import Run
    from b2batch.settings.runconfig import run_config
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
        scheduler = scheduler_of(system, group, "ask")
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
    running = wrapper_processes(group)
    for job in group:
        if job.host != host_name():
            job.detail = f"a local job of host {job.host}: ask there"
        elif str(job.folder) in running:
            job.state, job.detail = "running", f"process {running[str(job.folder)].pid}"
        elif steering_process(job) is not None:
            job.state, job.detail = "queued", f"waits for a slot in steering process {job.steering_pid}"
        elif (cancelled := JobOutcome.read(JobFiles(folder=job.folder, log_folder=job.folder)).cancelled):
            job.state, job.detail = "cancelled", f"{cancelled}, before it started"
        else:
            job.state, job.detail = "lost", "its steering process is gone and it wrote no exit code"


def wrapper_processes(group: list[RecordedJob]) -> dict[str, Any]:
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
    for folder in set(wrappers.values()) - set(found):  # a job forked without its wrapper notes its process
        process = noted_process(folder)
        if process is not None:
            found[folder] = process
    return found


def steering_process(job: RecordedJob) -> Any:
    """The job's steering process if it still runs on this host (not another process with its pid)."""
    import psutil

    if job.host != host_name() or not job.steering_pid:
        return None
    try:
        process = psutil.Process(int(job.steering_pid))
        started_before = job.submitted_at is None or process.create_time() <= float(job.submitted_at) + 1
        return process if started_before and process.status() != psutil.STATUS_ZOMBIE else None
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        return None
