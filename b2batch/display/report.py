"""What a run did, told when it ends: a summary on stderr, a timeline of every job (written by
:mod:`b2batch.display.trace`) and a JSON report, and whether anything failed.

:class:`RunReport` is what a front-end wraps around a run. The jobs come from the run's record (with the time
of each change of state, recorded here as it happens); work that did not run as jobs (a local run, wrapper
tasks, tasks left pending) comes from the front-end's own account, :class:`FrontEndAccount`.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TextIO

from b2batch.display.changes import Change, JobView, StateChanges
from b2batch.display.jsonfile import write_json
from b2batch.display.efficiency import efficiency
from b2batch.display.summary import OUTCOMES, summary_text
from b2batch.display.trace import describe, iso_time, trace_events, trace_head
from b2batch.engine import JobRecord, RunRecord
from b2batch.errors import B2BatchError, StoppedBySignal
from b2batch.engine.livestate import worker_job_counts

logger = logging.getLogger(__name__)

#: Where tasks that are no job ran (a local run, wrapper tasks, run_local tasks).
HERE = "here"


@dataclass
class TaskOutcome:
    """What became of one task in the run."""

    task_id: str
    name: str
    family: str
    system: str
    outcome: str  # one of OUTCOMES
    reason: str = ""
    record: JobRecord | None = None


@dataclass
class FrontEndAccount:
    """What a front-end says of its run beyond the jobs of the record."""

    #: Work left pending (never run) by key, with the reason if known.
    pending: dict[str, str] = field(default_factory=dict)
    #: What became of work that had no job (done or failed here, missing inputs, already complete ...).
    tasks: list[TaskOutcome] = field(default_factory=list)
    #: Whether the front-end judges the run failed (e.g. luigi could not schedule everything).
    failed: bool = False
    #: The front-end's own name for the run's status (e.g. luigi's LuigiStatusCode).
    status: str | None = None
    #: What the self-healing policies did (docs/policies.md), by policy: entries with a one-line ``text`` for
    #: the summary and the policy's own keys for the report (e.g. ``poison_tasks``, ``acceptance``).
    policies: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


@dataclass
class RunReport:
    """Wraps a run: live progress (batch runs), then the summary, the timeline and the report."""

    run: RunRecord
    batch: bool = False
    mode: str = "local"
    script: str | None = None
    argv: list[str] = field(default_factory=list)
    stream: TextIO | None = None
    result: Any = None  # the front-end's own result (luigi's LuigiRunResult), returned by process()
    outcomes_of_tasks: FrontEndAccount | None = None
    started_at: float = 0.0
    ended_at: float = 0.0
    interrupted: bool = False
    error: str = ""  # the exception that stopped the run, if one did
    failed: bool = False
    exits_on_failure: bool = True  # process()'s exit_on_failure: a failed run ends the script with status 1
    summarise: bool = True  # the setting run_summary: the summary on stderr, the timeline and report files
    paths: dict[str, Path] = field(default_factory=dict)
    #: When each job changed to which state (the timeline and the report's job histories are made of these).
    history: StateChanges = field(default_factory=StateChanges)
    #: Where the timeline and the reports of a batch run go (the front-end's log_dir, resolved; None: not
    #: written).
    log_folder: Path | None = None
    #: Where to write the run's live state for ``b2batch monitor`` while it runs (None: nowhere), with the
    #: front-end's own keys for it (engine/livestate.py).
    live_folder: Path | None = None
    live_info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._progress: Any = None
        self._live: Any = None
        #: The process that completes the report's pending accounting figures after the run (None: none).
        self.late_accounting: Any = None  # (a subprocess.Popen)

    # --- the run -------------------------------------------------------------------------------------

    def __enter__(self) -> Self:
        self.started_at = self.run.started_at
        self.run.keep_ended = None  # the report lists every job: the record keeps them all
        self.run.listeners.append(self._record)
        if self.batch:
            from b2batch.display.progress import Progress

            self._progress = Progress(self.run)
            self._progress.start()
        if self.live_folder is not None:
            from b2batch.engine.livestate import start_live_state

            info = {"front_end": "luigi", "script": self.script, "argv": self.argv, **self.live_info}
            self._live = start_live_state(self.run, self.live_folder, self.live_info.get("tag") or _tag(), info)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.ended_at = time.time()
        if self._progress is not None:
            self._progress.stop()
        if self._record in self.run.listeners:
            self.run.listeners.remove(self._record)
        self.interrupted = exc_type is not None
        self.error = "" if exc_type is None else _stopped_by(exc_type, exc)
        account = self.outcomes_of_tasks or FrontEndAccount()
        self.failed = self.interrupted or account.failed
        try:
            outcomes = self.outcomes()
            self.failed = self.failed or any(o.outcome in ("failed", "missing") for o in outcomes)
            if self._live is not None:
                failed = sum(1 for o in outcomes if o.outcome in ("failed", "missing"))
                self._live.stop(f"stopped by {self.error}" if self.interrupted else
                                f"{failed} task(s) failed" if failed else "failed" if self.failed else "success")
            if not self.summarise:
                return
            if self.batch and self.log_folder is not None:
                self.write_files(outcomes, self.log_folder)
            stream = self.stream or sys.stderr
            stream.write(self.summary(outcomes))
            stream.flush()
        except Exception:  # the account of a run must not change its result
            logger.exception("Could not summarise the run")

    def _record(self, record: JobRecord) -> None:
        """The listener on the record: when each job changed to which state (the timeline is made of these)."""
        job_id = record.job_ids[-1] if record.job_ids else None
        self.history.add(record.task_id, time.time(), record.state, job_id)

    @property
    def exit_status(self) -> int | None:
        """What process() makes the script's exit status (None: interrupted, the exception decides)."""
        return None if self.interrupted else int(self.failed and self.exits_on_failure)

    # --- what happened -------------------------------------------------------------------------------

    def outcomes(self) -> list[TaskOutcome]:
        """Every task of the run with what became of it: the jobs of the record first, then the others."""
        account = self.outcomes_of_tasks or FrontEndAccount()
        found: dict[str, TaskOutcome] = {}
        for record in list(self.run.jobs.values()):
            if record.state in ("done", "failed"):
                outcome, reason = record.state, record.reason
            elif record.state == "cancelled":
                outcome, reason = "unfinished", record.reason
            elif record.task_id in account.pending:
                outcome, reason = "not run", account.pending[record.task_id]
            else:
                outcome, reason = "unfinished", f"still {record.state} when the run ended"
            found[record.task_id] = TaskOutcome(record.task_id, describe(record.family, record.params), record.family,
                                                record.system, outcome, reason, record)
        for other in account.tasks:
            found.setdefault(other.task_id, other)
        return list(found.values())

    # --- the summary ---------------------------------------------------------------------------------

    def summary(self, outcomes: list[TaskOutcome]) -> str:
        """The end summary (:func:`b2batch.display.summary.summary_text`)."""
        return summary_text(self, outcomes)

    def policies(self) -> dict[str, list[dict[str, Any]]]:
        """What the self-healing policies did: the front-end's account, and the jobs requeued after a
        checkpoint (from the record)."""
        found = {name: list(entries) for name, entries in
                 (self.outcomes_of_tasks or FrontEndAccount()).policies.items() if entries}
        found.update({name: list(entries) for name, entries in self.run.policies.items() if entries})
        requeued = []
        for record in self.run.jobs.values():
            reasons = [r for r in record.resubmissions if r.startswith("checkpointed")]
            if reasons:
                requeued.append({"task_id": record.task_id, "task": describe(record.family, record.params),
                                 "requeues": len(reasons), "job_ids": list(record.job_ids),
                                 "text": f"{describe(record.family, record.params)}: requeued {len(reasons)} "
                                         f"time(s) to resume, jobs {', '.join(record.job_ids)}"})
        if requeued:
            found["checkpoints"] = requeued
        return found

    # --- the files -----------------------------------------------------------------------------------

    def write_files(self, outcomes: list[TaskOutcome], folder: Path) -> None:
        """Write the timeline and the report into ``folder`` (log_dir); their paths go into :attr:`paths`."""
        try:
            folder.mkdir(parents=True, exist_ok=True)
            stem = "b2batch-run-" + time.strftime("%Y%m%d-%H%M%S", time.localtime(self.started_at))
            for n in range(1, 1000):
                if not (folder / f"{stem}.trace.json").exists() and not (folder / f"{stem}.report.json").exists():
                    break
                stem = stem.split("_")[0] + f"_{n}"
            self.paths = {"trace": folder / f"{stem}.trace.json", "report": folder / f"{stem}.report.json"}
            records = list(self.run.jobs.values())
            indent = 1 if len(records) <= 1000 else None  # large files: json's fast encoder, no indent
            history = self.history.by_job()
            write_json(self.paths["trace"], trace_head(self.started_at, self.ended_at), "traceEvents",
                       trace_events(records, history, self.started_at, self.ended_at), indent)
            head = self._report_head(outcomes)
            write_json(self.paths["report"], head, "jobs", self._job_entries(history), indent, default=str)
        except OSError as e:
            logger.warning("Could not write the run's timeline and report: %s", e)
            self.paths = {}
            return
        if head["accounting_pending"]:  # the pilots' figures, when the scheduler has them (after the run)
            self.late_accounting = complete_accounting_later(self.paths["report"])
        try:  # the page shows what the report's file holds (its head as JSON reads it back, the jobs from the
            # record), as `b2batch report` shows it later from the file
            from b2batch.display.html import write_html

            jobs = [JobView(record, history.get(record.task_id, [])) for record in records]
            as_written = json.loads(json.dumps(head, default=str))
            self.paths["html"] = write_html({**as_written, "jobs": jobs}, self.paths["report"])
        except Exception as e:  # noqa: BLE001 - the page must not change the run's result
            logger.warning("Could not write the run's HTML report: %s", e)

    def report(self, outcomes: list[TaskOutcome]) -> dict[str, Any]:
        """The machine-readable report: the run, its totals, every job with its history, the other tasks."""
        return {**self._report_head(outcomes), "jobs": list(self._job_entries(self.history.by_job()))}

    def _job_entries(self, history: dict[str, list[Change]]) -> Iterator[dict[str, Any]]:
        """Each job of the report, made when its turn comes (:func:`write_json` holds one at a time)."""
        for record in self.run.jobs.values():
            job = record.as_dict()
            job["history"] = [{"at": t, "state": s, "job_id": j} for t, s, j in history.get(record.task_id, [])]
            yield job

    def _report_head(self, outcomes: list[TaskOutcome]) -> dict[str, Any]:
        """The report without its jobs."""
        from b2batch import __version__

        totals: Counter[str] = Counter(o.outcome for o in outcomes)
        by_family: dict[str, dict[str, dict[str, int]]] = {}
        for o in outcomes:
            by_family.setdefault(o.family, {}).setdefault(o.system, Counter())[o.outcome] += 1  # type: ignore[arg-type]
        return {
            "b2batch_version": __version__,
            "script": self.script,
            "argv": self.argv,
            "mode": self.mode,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "started": iso_time(self.started_at),
            "ended": iso_time(self.ended_at),
            "elapsed_seconds": round(self.ended_at - self.started_at, 3),
            "interrupted": self.interrupted,
            "failed": self.failed,
            "exit_status": self.exit_status,
            "luigi_status": (self.outcomes_of_tasks or FrontEndAccount()).status,
            "totals": {**{o: totals[o] for o in OUTCOMES}, "jobs": sum(len(r.job_ids) for r in self.run.jobs.values()),
                       "resubmissions": sum(len(r.resubmissions) for r in self.run.jobs.values()),
                       **batch_job_counts(self.run.jobs.values(), self.run.worker_jobs.values())},
            "worker_jobs": [{"key": key, **entry} for key, entry in sorted(self.run.worker_jobs.items())],
            "by_family": {f: {s: dict(c) for s, c in systems.items()} for f, systems in by_family.items()},
            "scheduler_calls": dict(sorted(self.run.scheduler_calls.items())),
            "efficiency": efficiency(self.run.jobs.values()),
            "accounting": dict(self.run.accounting),
            "accounting_pending": {system: {"tag": entry["tag"], "jobs": dict(entry["jobs"])}
                                   for system, entry in getattr(self.run, "accounting_pending", {}).items()},
            "job_shapes": {family: dict(entry) for family, entry in sorted(self.run.shapes.items())},
            "policies": self.policies(),
            "other_tasks": [{"task_id": o.task_id, "task": o.name, "outcome": o.outcome, "reason": o.reason}
                            for o in outcomes if o.record is None],
            "trace": str(self.paths.get("trace", "")),
        }


# --- helpers ----------------------------------------------------------------------------------------------

def complete_accounting_later(report: Path) -> Any:
    """Start :mod:`b2batch.command.late_accounting` on ``report`` as a process of its own (its own session, no
    terminal and none of the run's pipes: it neither holds up whoever waits for the run nor ends with its
    terminal); None if it could not start (the pending figures then stay listed as pending)."""
    import subprocess  # (only then: the modules of a run's start count)

    try:
        return subprocess.Popen([sys.executable, "-m", "b2batch.command.late_accounting", str(report)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True, cwd=report.parent)
    except OSError as e:
        logger.warning("Could not start completing the report's accounting figures: %s", e)
        return None


def batch_job_counts(records: Any, workers: Any) -> dict[str, Any]:
    """The batch jobs of a run: ``batch_jobs``, every job the batch systems got (the own jobs of tasks, each
    id once, and the pilot and bundle jobs), and per kind of worker job how many were submitted, started and
    never started (``worker_jobs``; a pilot cancelled while queued at the run's end never started)."""
    own = {(r.system, job_id) for r in records if not r.carrier for job_id in r.job_ids}
    kinds = {kind: {k: v for k, v in counts.items() if k != "running"}
             for kind, counts in worker_job_counts(workers).items()}
    return {"batch_jobs": len(own) + sum(c["submitted"] for c in kinds.values()), "worker_jobs": kinds}


def _tag() -> str:
    import uuid

    return uuid.uuid4().hex[:8]


def _stopped_by(exc_type: type[BaseException], exc: BaseException | None) -> str:
    """What stopped a run, as the summary names it: the signal (``SIGTERM``); b2batch's error, whose one message
    follows the summary; else the exception's class."""
    if isinstance(exc, StoppedBySignal):
        return exc.signal_name
    if exc_type is KeyboardInterrupt:
        return "SIGINT (Ctrl-C)"  # Python's own handler of SIGINT raised it
    if isinstance(exc, B2BatchError):
        return "the error below"
    return exc_type.__name__
