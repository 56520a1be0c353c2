"""How the luigi front-end judges a task's ended job: its result and exit code, then its outputs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from luigi.scheduler import DONE, FAILED

from b2batch.engine import JobStatus, Run
from b2batch.engine.outcome import JobOutcome
from b2batch.luigi_frontend.jobs import RunContext, TaskJobs
from helpers.made_task import Made


def verdict(task: Made, exit_code: int, result: dict[str, Any] | None, written: bool) -> tuple[str, str]:
    if written:
        task.run()
    jobs = TaskJobs(Run(), RunContext())
    job = jobs.make(task)
    jobs.jobs[task.task_id] = job
    job.files.make_folders()
    status = JobStatus.successful if exit_code == 0 else JobStatus.aborted
    job.outcome = JobOutcome(status, exit_code=exit_code, result=result, files=job.files)
    jobs.ended(job)
    [ended] = jobs.results()
    assert ended.task is task
    return ended.status, ended.explanation


@pytest.fixture(autouse=True)
def _results_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path(tmp_path, "results").mkdir()


def test_a_job_that_ended_well_without_handing_its_result_over_is_judged_by_its_outputs() -> None:
    """A pilot's worker lost just after it wrote the exit code of a unit, before the line of its log that hands
    over the unit's result: the task's outputs are there, so it is done (not failed, not run again)."""
    assert verdict(Made(n=1), 0, None, written=True) == (DONE, "")
    status, why = verdict(Made(n=2), 0, None, written=False)
    assert status == FAILED and "its job ended without writing the outputs it declares" in why and "made.txt" in why


def test_a_failed_job_fails_also_with_its_outputs_there() -> None:
    task = Made(n=3)
    status, why = verdict(task, 1, {"status": FAILED, "error": "ValueError: no"}, written=True)
    assert status == FAILED and "Error: ValueError: no" in why
    assert not Path(task.get_output_file_name("made.txt")).exists()  # a failed job's outputs never count


def test_a_task_that_said_it_is_done_with_its_outputs_there_is_done() -> None:
    assert verdict(Made(n=4), 0, {"status": DONE}, written=True) == (DONE, "")
