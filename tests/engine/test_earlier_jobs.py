"""A task handed out after its job of an earlier (killed) run ended: done without a new job when its outputs
are there, submitted again with a warning when that job failed."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from b2batch.engine import JobState, JobStatus, Run
from b2batch.engine.outcome import written_exit_code
from helpers.simulated import Simulated, make_job
from helpers.made_task import Made
from b2batch.luigi_frontend.jobs import RunContext, TaskJobs
from b2batch.luigi_frontend.task_outputs import task_files
from luigi.scheduler import DONE


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
    assert "its earlier local job 123.1 failed with exit code 1" in caplog.text
    run.interrupt()


def test_a_task_whose_earlier_job_was_cancelled_is_submitted_again_without_a_failure(caplog) -> None:
    task = Made(n=5)
    earlier_job(task, 143)  # killed by SIGTERM when the earlier run was interrupted, which noted it
    task_files(task).record_cancel("cancelled when the run was interrupted")
    run = Run()
    jobs = TaskJobs(run, RunContext())
    with caplog.at_level(logging.INFO):
        jobs.start(task)
    assert len(run.live) == 1
    assert "failed" not in caplog.text and not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert "its earlier local job 123.1 was cancelled when the run was interrupted; submitting it again" in caplog.text
    assert not task_files(task).cancelled.exists()  # the new job starts without the earlier one's note
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


DIRECT = """
import os
import sys
import time
from pathlib import Path

import b2batch

class Direct(b2batch.Task):
    def output(self):
        yield self.add_to_output("direct.txt")

    def run(self):  # writes its output directly (no on_temporary_files)
        with open(self.get_output_file_name("direct.txt"), "w") as f:
            f.write("partial")
            f.flush()
            if os.environ.get("SLOW"):
                time.sleep(120)
            f.write(" and complete")

if __name__ == "__main__":
    b2batch.process(Direct(), batch=True, batch_system="local")
"""


@pytest.mark.slow
def test_a_task_killed_while_writing_directly_runs_again_on_the_rerun(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys
    import time

    from conftest import clean_env

    (tmp_path / "direct.py").write_text(DIRECT)
    output = tmp_path / "results" / "direct.txt"
    steering = subprocess.Popen([sys.executable, "direct.py"], cwd=tmp_path, env=clean_env(SLOW="1"),
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True)
    try:
        deadline = time.monotonic() + 60
        while not (output.exists() and output.read_text() == "partial") and time.monotonic() < deadline:
            time.sleep(0.1)
        steering.send_signal(signal.SIGINT)
        _, stderr = steering.communicate(timeout=60)
    finally:
        steering.kill()
    assert steering.returncode == 130, stderr[-3000:]
    assert output.read_text() == "partial"  # what the killed job left
    rerun = subprocess.run([sys.executable, "direct.py"], cwd=tmp_path, env=clean_env(), capture_output=True,
                           text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "its outputs may be partial and do not count: removed" in rerun.stderr
    assert output.read_text() == "partial and complete"


class Remembering(Simulated):
    """A scheduler that still lists the jobs of an earlier steering process (finished ones as done)."""

    name = "remembering"

    def __init__(self, run: Run) -> None:
        super().__init__(run)
        self.earlier: dict[str, JobState] = {}

    def attach(self, job, journal) -> bool:
        state = self.earlier.get(str(journal.get("job_id")))
        if state is None or (state.status.final and written_exit_code(job.files) != 0):
            return False
        job.job_id = str(journal["job_id"])
        self.answers[job.job_id] = state
        self.changed.add(job.job_id)
        return True


@pytest.mark.parametrize("exit_code, submitted", [(0, []), (1, [1])])
def test_a_job_that_ends_between_the_front_ends_check_and_its_submission_runs_once(
        tmp_path: Path, exit_code: int, submitted: list[int]) -> None:
    """A restarted run finds a task's earlier job still running when its front-end checks the task; the job
    ends before the run gets the task: ended well, it is followed to its end (not run twice); ended badly,
    it goes again. (A SIGKILL test under load on the LSF emulator ran a task twice this way.)"""
    run = Run()
    system = run.add_system("remembering", Remembering)
    earlier = make_job(tmp_path, "late", system="remembering").files  # as the killed steering process left it
    earlier.make_folders()
    earlier.record_submission("remembering", "41")
    system.earlier["41"] = JobState(JobStatus.successful)
    job = make_job(tmp_path, "late", system="remembering")
    job.files.exit_code.write_text(f"{exit_code}\n")  # the job ended after the front-end looked
    run.submit(job)
    run.poll()
    assert system.submissions == submitted
    if not submitted:
        assert job.earlier and job.job_id == "41"
    run.interrupt()


def test_a_task_whose_earlier_job_succeeded_but_whose_outputs_are_gone_runs_anew(tmp_path: Path) -> None:
    """Its earlier job ended well, but its outputs were removed since (``--remove``): the front-end saw that
    job end, so a batch system that still lists it (a pilot's log, a scheduler's history) is not followed;
    a new job runs the task."""
    task = Made(n=3)
    earlier_job(task, 0)  # no outputs
    run = Run()
    jobs = TaskJobs(run, RunContext())
    jobs.start(task)
    assert jobs.jobs[task.task_id].earlier_ended
    run.interrupt()
    run = Run()
    system = run.add_system("remembering", Remembering)
    earlier = make_job(tmp_path, "gone", system="remembering").files
    earlier.make_folders()
    earlier.record_submission("remembering", "41")
    earlier.exit_code.write_text("0\n")
    system.earlier["41"] = JobState(JobStatus.successful)
    job = make_job(tmp_path, "gone", system="remembering")
    job.earlier_ended = True
    run.submit(job)
    run.poll()
    assert system.submissions == [1], "the earlier job was followed: the task would be done without its outputs"
    run.interrupt()
