"""luigi's account of a run for b2batch's summary and report: which tasks luigi completed, found complete,
left pending (and why), or could not schedule, from luigi's own execution summary sets."""

from __future__ import annotations

import logging
from typing import Any

from b2batch.display.report import HERE, FrontEndAccount, TaskOutcome, describe

logger = logging.getLogger(__name__)

#: luigi's status codes that mean the run did not do its job.
FAILED_STATUSES = ("FAILED", "FAILED_AND_SCHEDULING_FAILED", "SCHEDULING_FAILED", "MISSING_EXT")
#: Why luigi left a task pending, by the name of its set in luigi's summary.
PENDING_REASONS = {
    "upstream_failure": "a requirement failed",
    "upstream_missing_dependency": "a requirement is missing",
    "upstream_scheduling_error": "a requirement could not be scheduled",
    "upstream_run_by_other_worker": "a requirement runs in another worker",
    "run_by_other_worker": "another worker runs it",
    "not_run": "the scheduler did not let it run",
}
#: luigi's sets, and what b2batch's summary calls their tasks.
BY_SET = (("completed", "done"), ("failed", "failed"), ("scheduling_error", "failed"),
          ("still_pending_ext", "missing"), ("still_pending_not_ext", "not run"),
          ("already_done", "already complete"))


def luigi_sets(result: Any) -> dict[str, set[Any]]:
    """luigi's sets of tasks by outcome for a run result (empty without one)."""
    if result is None or getattr(result, "worker", None) is None:
        return {}
    from b2batch.luigi_frontend.seam import summary_sets

    try:
        return summary_sets(result.worker)
    except Exception as e:  # pragma: no cover - only if luigi changed
        logger.warning("Cannot read luigi's execution summary (%s); the b2batch summary shows jobs only", e)
        return {}


def luigi_outcomes(result: Any, batch: bool, errors: dict[str, str] | None = None,
                   batch_system: Any = None) -> FrontEndAccount:
    """The account of a luigi run: pending tasks with reasons, the tasks that had no job, failure;
    ``errors`` says why tasks could not be scheduled, where known; ``batch_system`` is the run's."""
    sets = luigi_sets(result)
    pending_reason: dict[str, str] = {}
    for name, reason in PENDING_REASONS.items():
        for task in sets.get(name, ()):
            pending_reason.setdefault(task.task_id, reason)
    pending = {t.task_id: pending_reason.get(t.task_id, "") for t in sets.get("still_pending_not_ext", ())}
    tasks = []
    for name, outcome in BY_SET:
        for task in sorted(sets.get(name, ()), key=lambda t: t.task_id):
            unknown = "its complete() or requires() raised an error (see the log)"
            reason = {"scheduling_error": (errors or {}).get(task.task_id, unknown),
                      "still_pending_ext": "external data that does not exist",
                      "still_pending_not_ext": pending_reason.get(task.task_id, "")}.get(name, "")
            params = task.to_str_params(only_significant=True)
            tasks.append(TaskOutcome(task.task_id, describe(task.task_family, params), task.task_family,
                                     _where(task, batch, batch_system), outcome, reason))
    status = getattr(getattr(result, "status", None), "name", None)
    failed = result is not None and (not result.scheduling_succeeded or status in FAILED_STATUSES)
    return FrontEndAccount(pending=pending, tasks=tasks, failed=failed, status=status)


def _where(task: Any, batch: bool, batch_system: Any = None) -> str:
    """The batch system of a task that would run as a job in a batch run, else "here"."""
    from b2batch.luigi_frontend.task_systems import batch_system_of, runs_as_job
    from b2batch.systems import system_name_of

    if not batch or not runs_as_job(task, batch_system):
        return HERE
    try:
        return system_name_of(batch_system_of(task, batch_system))
    except Exception:  # a bad setting: the log says what
        return "?"
