"""How a scheduler job's state and its exit-code file become a JobStatus (SchedulerProcess.get_job_status),
against a scripted status query: no scheduler needed."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

import b2batch
from b2batch.monitor import JobMonitor, NativeState
from b2batch.process import JobStatus
from b2batch.systems.htcondor import HTCondorProcess
from b2batch.systems.scheduler import SchedulerProcess
from b2batch.systems.slurm import SlurmProcess


class Sleepy(b2batch.Task):
    n = b2batch.IntParameter(default=0)

    def output(self):
        yield self.add_to_output("out.txt")

    def run(self):  # never run here
        raise AssertionError


@pytest.fixture
def slurm_job(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[SlurmProcess, dict[str, NativeState]]]:
    """A SlurmProcess for job 42 whose monitor answers from the returned dict (a poll at every question)."""
    b2batch.set_setting("poll_interval", 0.0)
    queue: dict[str, NativeState] = {}
    monitor = JobMonitor("slurm", lambda ids: {i: queue[i] for i in ids if i in queue})
    monkeypatch.setattr(SlurmProcess, "_monitors", {SlurmProcess: monitor})
    job = SlurmProcess(task=Sleepy(), scheduler=None, result_queue=None, worker_timeout=None)
    job.job_id, job.submitted_at = "42", time.time()
    job.job_files.folder.mkdir(parents=True)
    monitor.track("42")
    yield job, queue


def test_failed_job_is_judged_by_its_final_state_not_by_completing(slurm_job, monkeypatch) -> None:
    job, queue = slurm_job
    monkeypatch.setattr(job, "completing_grace", 60.0)
    queue["42"] = NativeState("RUNNING")
    assert job.get_job_status() == JobStatus.running
    # Slurm sent SIGTERM at the time limit: the wrapper wrote 143, and the job is completing.
    job.job_files.exit_code.write_text("143\n")
    queue["42"] = NativeState("COMPLETING")
    assert job.get_job_status() == JobStatus.running
    queue["42"] = NativeState("TIMEOUT")
    assert job.get_job_status() == JobStatus.aborted
    assert job.failure_reason() == "slurm state TIMEOUT"


def test_a_job_stuck_completing_is_aborted_after_the_grace(slurm_job, monkeypatch) -> None:
    job, queue = slurm_job
    monkeypatch.setattr(job, "completing_grace", 0.2)
    job.job_files.exit_code.write_text("1\n")
    queue["42"] = NativeState("COMPLETING")
    assert job.get_job_status() == JobStatus.running
    time.sleep(0.3)
    assert job.get_job_status() == JobStatus.aborted
    assert job.failure_reason() == "slurm state COMPLETING"


def test_succeeded_job_is_done_while_completing(slurm_job) -> None:
    job, queue = slurm_job
    job.job_files.exit_code.write_text("0\n")
    queue["42"] = NativeState("COMPLETING")
    assert job.get_job_status() == JobStatus.successful


def test_failed_job_that_left_the_queue_is_aborted_by_its_exit_code(slurm_job) -> None:
    job, queue = slurm_job
    queue["42"] = NativeState("RUNNING")
    assert job.get_job_status() == JobStatus.running
    del queue["42"]
    job.job_files.exit_code.write_text("2\n")
    assert job.get_job_status() == JobStatus.aborted


def test_a_restarted_run_asks_about_the_jobs_of_all_its_tasks_at_once(monkeypatch) -> None:
    """Re-attaching N tasks whose status query names job ids (HTCondor, LSF) costs one lookup, not N."""
    monkeypatch.setattr(SchedulerProcess, "_earlier", {})
    monkeypatch.setattr(HTCondorProcess, "_monitors", {})
    states = {"7.0": NativeState("2"), "7.1": NativeState("1"), "7.2": NativeState("4", exit_code=0),
              "7.3": NativeState("5", reason="held by the admin")}
    queries: list[list[str]] = []

    def query_states(ids: list[str]) -> dict[str, NativeState]:
        queries.append(ids)
        return {i: states[i] for i in ids if i in states}

    monkeypatch.setattr(HTCondorProcess, "query_states", staticmethod(query_states))
    jobs = [HTCondorProcess(task=Sleepy(n=n), scheduler=None, result_queue=None, worker_timeout=None)
            for n in range(6)]
    for n, job in enumerate(jobs):  # the journals a killed steering process left (7.4 and 7.5 are forgotten)
        job.job_files.folder.mkdir(parents=True)
        job.job_files.record_submission("htcondor", f"7.{n}")
    finished = Sleepy(n=9)  # a job that wrote its exit code is not asked about
    done = HTCondorProcess(task=finished, scheduler=None, result_queue=None, worker_timeout=None)
    done.job_files.folder.mkdir(parents=True)
    done.job_files.record_submission("htcondor", "6.0")
    done.job_files.exit_code.write_text("0\n")

    attached = [job.attach(job.job_files.read_submission()) for job in jobs]
    # running and idle jobs are followed; a completed one, an unknown one and a held one (final) are not
    assert attached == [True, True, False, False, False, False]
    assert len(queries) == 1 and sorted(queries[0]) == [f"7.{n}" for n in range(6)]
    assert HTCondorProcess.monitor().tracked == {"7.0", "7.1"}
    # what was heard of a job the steering process cancels itself is forgotten: it is asked about again
    monkeypatch.setattr("b2batch.commands.run_with_retries", lambda *a, **k: None)
    jobs[0].kill_job()
    states["7.0"] = NativeState("3", reason="removed by user")
    assert jobs[0].attach({"job_id": "7.0"}) is False
    assert queries[1:] == [["7.0"]]
