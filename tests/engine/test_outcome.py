"""How a job ended is read once, by the engine, into one JobOutcome that every front-end judges by."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.simulated import Simulated, make_job

from b2batch.engine import Job, JobOutcome, JobState, JobStatus, Run, last_outcome


def _run_one(tmp_path: Path, key: str, state: JobState, exit_code: int | None, **files: str) -> tuple[Run, Job]:
    run = Run()
    system = run.add_system("simulated", Simulated)
    job = make_job(tmp_path, key, max_resubmissions=0)
    run.submit(job)
    assert run.poll() == []
    for name, text in files.items():
        getattr(job.files, name).write_text(text)
    if exit_code is None:
        system.answers[str(job.job_id)] = state
        system.changed.add(str(job.job_id))
    else:
        system.end(job, state, exit_code)
    assert run.poll() == [job]
    return run, job


def test_a_job_killed_by_a_signal_ends_with_one_outcome_read_once(tmp_path: Path) -> None:
    state = JobState(JobStatus.aborted, "OUT_OF_MEMORY", cause="memory", node="node7")
    _run, job = _run_one(tmp_path, "killed", state, 137, setup_failed="", result=json.dumps({"status": "FAILED"}))
    outcome = job.outcome
    assert isinstance(outcome, JobOutcome)
    assert (outcome.status, outcome.reason, outcome.exit_code, outcome.signal) == (
        JobStatus.aborted, "OUT_OF_MEMORY", 137, "SIGKILL")
    assert (outcome.cause, outcome.node) == ("memory", "node7")
    assert outcome.result == {"status": "FAILED"} and not outcome.succeeded
    assert (outcome.stdout, outcome.stderr) == (job.files.stdout, job.files.stderr)
    # read once: what the files say later does not change how the job ended
    job.files.exit_code.write_text("0\n")
    job.files.result.unlink()
    assert job.outcome is outcome and outcome.exit_code == 137 and outcome.result == {"status": "FAILED"}
    message = job.failure_message()
    assert "exited with code 137 (killed by SIGKILL)" in message and "Batch system: OUT_OF_MEMORY" in message


def test_a_set_up_failure_and_a_cancel_are_part_of_the_outcome(tmp_path: Path) -> None:
    _run, job = _run_one(tmp_path, "setup", JobState(JobStatus.aborted), 3,
                         setup_failed="env_script /no/such.sh could not be sourced\n",
                         cancelled="cancelled when the run was interrupted\n")
    assert job.outcome.setup_failure == "env_script /no/such.sh could not be sourced"
    assert job.outcome.cancelled == "cancelled when the run was interrupted"
    assert "could not set up its environment: env_script /no/such.sh" in job.failure_message()


def test_a_job_without_an_exit_code_has_none_and_no_signal(tmp_path: Path) -> None:
    _run, job = _run_one(tmp_path, "lost", JobState(JobStatus.aborted, "", "node failed"), None)
    assert job.outcome.exit_code is None and job.outcome.signal == "" and job.outcome.scheduler_side == "node failed"
    assert "ended without an exit code" in job.failure_message()
    assert last_outcome(job.files) is None  # an earlier run's job that wrote none may still run


def test_the_front_ends_retry_rule_is_given_the_outcome(tmp_path: Path) -> None:
    run = Run()
    system = run.add_system("simulated", Simulated)
    seen: list[JobOutcome] = []
    run.retry_reason = lambda job, outcome: seen.append(outcome) or ("killed" if outcome.signal else "")
    job = make_job(tmp_path, "retried", max_resubmissions=1)
    run.submit(job)
    run.poll()
    system.end(job, JobState(JobStatus.aborted), 143)
    assert run.poll() == [] and job.resubmissions == 1  # SIGTERM: submitted again
    assert run.poll() == [] and system.submissions == [1, 1]
    system.end(job, JobState(JobStatus.aborted), 1)
    assert run.poll() == [job]
    assert [(o.exit_code, o.signal) for o in seen] == [(143, "SIGTERM"), (1, "")]
    assert job.outcome.exit_code == 1


def test_the_last_outcome_of_an_earlier_job_comes_from_its_files(tmp_path: Path) -> None:
    _run, job = _run_one(tmp_path, "earlier", JobState(JobStatus.successful), 0)
    earlier = last_outcome(job.files.__class__.at(tmp_path / "task_files", "Work", "earlier", job.files.log_folder))
    assert earlier is not None and earlier.succeeded and earlier.exit_code == 0


def test_no_front_end_reads_a_jobs_exit_code_or_result_file() -> None:
    """Front-ends judge jobs by job.outcome or last_outcome(): only the engine and the batch systems read the
    files a job's wrapper writes when it ends."""
    import re

    package = Path(__file__).resolve().parents[2] / "b2batch"
    reading = re.compile(r"\.(read_exit_code|read_result|read_cancel|read_setup_failure)\(|files\.result_bytes\.read")
    found = sorted(str(path.relative_to(package)) for path in package.rglob("*.py")
                   if path.relative_to(package).parts[0] not in ("engine", "systems", "emulators")
                   and reading.search(path.read_text()))
    assert found == [], found


def test_an_interrupted_run_does_not_call_a_job_that_ended_well_cancelled(tmp_path: Path) -> None:
    """Ctrl-C right after a job wrote exit code 0, before the run saw it end: the record says done, the job gets
    no cancel note and no cancel command; a job still running is cancelled."""
    run = Run()
    system = run.add_system("simulated", Simulated)
    finished, running = make_job(tmp_path, "finished"), make_job(tmp_path, "running")
    for job in (finished, running):
        run.submit(job)
    assert run.poll() == []
    finished.files.exit_code.write_text("0\n")  # ended, not polled yet
    run.interrupt()
    assert run.record.jobs["finished"].state == "done" and not finished.files.cancelled.exists()
    assert run.record.jobs["running"].state == "cancelled" and running.files.cancelled.exists()
    assert system.cancelled == [str(running.job_id)]
