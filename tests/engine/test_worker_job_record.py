"""The run's record of its worker jobs (pilots and bundles), without a scheduler: what the pilot pool notes about a
worker job (submitted, started, units run, ended) is what the report counts. The end-to-end check of the same
(a pilot run's report and HTML page) is in tests/display/ and is slow; this one is in the fast tier."""

from __future__ import annotations

from b2batch.display.report import batch_job_counts
from b2batch.engine.record import RunRecord


def test_worker_jobs_are_recorded_as_the_pool_reports_them_and_counted_in_the_report() -> None:
    record = RunRecord()
    record.worker_job("pilot-a", kind="pilot", family="Leaf", system="slurm", job_id="11")
    record.worker_job("pilot-b", kind="pilot", family="Leaf", system="slurm", job_id="12")
    record.worker_job("pilot-a", state="running", started_at=100.0)
    record.worker_job("pilot-a", units=1)
    record.worker_job("pilot-a", units=1)
    record.worker_job("pilot-a", state="done", ended_at=130.0)
    record.worker_job("pilot-b", state="cancelled", ended_at=131.0)  # cancelled while queued
    record.worker_job("earlier-run", units=1)  # not one of this run's: no kind, not recorded

    assert sorted(record.worker_jobs) == ["pilot-a", "pilot-b"]
    a = record.worker_jobs["pilot-a"]
    assert (a["kind"], a["job_id"], a["units"], a["state"], a["ended_at"]) == ("pilot", "11", 2, "done", 130.0)
    counts = batch_job_counts([], record.worker_jobs.values())
    assert counts == {"batch_jobs": 2, "worker_jobs": {"pilot": {"submitted": 2, "started": 1, "never_started": 1}}}
