"""A task handed out after its job of an earlier (killed) run ended: done without a new job when its outputs
are there, submitted again with a warning when that job failed."""

from __future__ import annotations

import logging
from pathlib import Path

import b2batch
from b2batch.engine import Run
from b2batch.luigi_frontend.jobs import RunContext, TaskJobs, task_files
from luigi.scheduler import DONE


class Made(b2batch.Task):
    n = b2batch.IntParameter()
    batch_system = "local"

    def output(self):
        yield self.add_to_output("made.txt")

    def run(self):
        Path(self.get_output_file_name("made.txt")).write_text("made")


def earlier_job(task: Made, exit_code: int) -> None:
    files = task_files(task)
    files.folder.mkdir(parents=True)
    files.record_submission("local", "123.1")
    files.exit_code.write_text(f"{exit_code}\n")


def test_a_task_whose_earlier_job_succeeded_is_done_without_a_new_job(caplog) -> None:
    task = Made(n=1)
    earlier_job(task, 0)
    Path(task.get_output_file_name("made.txt")).parent.mkdir(parents=True, exist_ok=True)
    Path(task.get_output_file_name("made.txt")).write_text("made")
    run = Run()
    jobs = TaskJobs(run, RunContext())
    with caplog.at_level(logging.INFO):
        jobs.start(task)
    assert not run.live  # nothing submitted
    results = jobs.poll()
    assert [(r.task, r.status) for r in results] == [(task, DONE)]
    assert "ended successfully and its outputs are there; not submitted again" in caplog.text


def test_a_task_whose_earlier_job_failed_is_submitted_again_with_a_warning(caplog) -> None:
    task = Made(n=2)
    earlier_job(task, 1)
    run = Run()
    jobs = TaskJobs(run, RunContext())
    with caplog.at_level(logging.WARNING):
        jobs.start(task)
    assert len(run.live) == 1
    assert "local job 123.1 of an earlier run failed with exit code 1" in caplog.text
    run.interrupt()


def written(task: Made) -> Path:
    path = Path(task.get_output_file_name("made.txt"))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("half")
    return path


def test_outputs_of_a_killed_or_failed_job_never_count(caplog) -> None:
    task = Made(n=3)
    earlier_job(task, 143)  # killed: the wrapper wrote 128 + SIGTERM
    output = written(task)
    assert task.complete()
    jobs = TaskJobs(Run(), RunContext())
    with caplog.at_level(logging.WARNING):
        assert jobs.outputs_count(task) is False
    assert not output.exists()
    assert "ended with exit code 143; its outputs may be partial and do not count: removed" in caplog.text


def test_outputs_of_a_job_that_still_runs_do_not_count_and_stay(caplog) -> None:
    task = Made(n=4)
    files = task_files(task)
    files.folder.mkdir(parents=True)
    files.record_submission("local", "9.1")  # no exit code: it has not ended
    output = written(task)
    jobs = TaskJobs(Run(), RunContext())
    with caplog.at_level(logging.WARNING):
        assert jobs.outputs_count(task) is False
    assert output.exists()  # it may still be writing: followed, not removed
    assert "has not ended; its outputs do not count until it has" in caplog.text


def test_outputs_of_a_job_that_succeeded_or_of_no_job_count() -> None:
    done, plain = Made(n=5), Made(n=6)
    earlier_job(done, 0)
    written(done)
    written(plain)
    jobs = TaskJobs(Run(), RunContext())
    assert jobs.outputs_count(done) and jobs.outputs_count(plain)
