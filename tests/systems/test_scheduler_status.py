"""How a scheduler job's state and its exit-code file become a JobState (SchedulerSystem.states), against a
scripted status query: no scheduler needed."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

import b2batch
from b2batch.engine import Job, JobStatus, NativeState, Run
from b2batch.engine.polling import JobMonitor
from b2batch.luigi_frontend.jobs import RunContext, TaskJobs
from b2batch.settings.runconfig import run_config
from b2batch.systems.htcondor import HTCondorSystem
from b2batch.systems.slurm import SlurmSystem


class Sleepy(b2batch.Task):
    n = b2batch.IntParameter(default=0)
    batch_system = "slurm"

    def output(self):
        yield self.add_to_output("out.txt")

    def run(self):  # never run here
        raise AssertionError


def make_job(run: Run, task: b2batch.Task) -> Job:
    job = TaskJobs(run, RunContext()).make(task)
    job.files.folder.mkdir(parents=True, exist_ok=True)
    return job


class Scripted:
    """A Slurm system of one run with job 42, whose monitor answers from a dict at every question."""

    def __init__(self) -> None:
        b2batch.set_setting("poll_interval", 0.0)
        self.queue: dict[str, NativeState] = {}
        self.run = Run()
        self.system = self.run.add_system("slurm", SlurmSystem)
        self.system.monitor = JobMonitor("slurm", lambda ids: {i: self.queue[i] for i in ids if i in self.queue})
        self.job = make_job(self.run, Sleepy())
        self.system._track(self.job, "42")

    def state(self):
        self.system.monitor.invalidate()
        return self.system.states([self.job]).get(self.job)


@pytest.fixture
def slurm() -> Iterator[Scripted]:
    yield Scripted()


def test_failed_job_is_judged_by_its_final_state_not_by_completing(slurm, monkeypatch) -> None:
    monkeypatch.setattr(slurm.system, "completing_grace", 60.0)
    slurm.queue["42"] = NativeState("RUNNING")
    assert slurm.state().status == JobStatus.running
    # Slurm sent SIGTERM at the time limit: the wrapper wrote 143, and the job is completing.
    slurm.job.files.exit_code.write_text("143\n")
    slurm.queue["42"] = NativeState("COMPLETING")
    assert slurm.state().status == JobStatus.running
    slurm.queue["42"] = NativeState("TIMEOUT")
    state = slurm.state()
    assert state.status == JobStatus.aborted and state.reason == "slurm state TIMEOUT"


def test_a_job_stuck_completing_is_aborted_after_the_grace(slurm, monkeypatch) -> None:
    monkeypatch.setattr(slurm.system, "completing_grace", 0.2)
    slurm.job.files.exit_code.write_text("1\n")
    slurm.queue["42"] = NativeState("COMPLETING")
    assert slurm.state().status == JobStatus.running
    time.sleep(0.3)
    state = slurm.state()
    assert state.status == JobStatus.aborted and state.reason == "slurm state COMPLETING"


def test_succeeded_job_is_done_while_completing(slurm) -> None:
    slurm.job.files.exit_code.write_text("0\n")
    slurm.queue["42"] = NativeState("COMPLETING")
    assert slurm.state().status == JobStatus.successful


def test_failed_job_that_left_the_queue_is_aborted_by_its_exit_code(slurm) -> None:
    slurm.queue["42"] = NativeState("RUNNING")
    assert slurm.state().status == JobStatus.running
    del slurm.queue["42"]
    slurm.job.files.exit_code.write_text("2\n")
    assert slurm.state().status == JobStatus.aborted


def test_only_jobs_whose_answer_changed_are_judged_again(slurm) -> None:
    """A poll costs work for the jobs that changed, not for all jobs in flight."""
    slurm.queue["42"] = NativeState("RUNNING")
    assert slurm.state().status == JobStatus.running
    assert slurm.state() is None  # same answer: nothing to report
    slurm.queue["42"] = NativeState("COMPLETED")
    assert slurm.state().status == JobStatus.successful


def test_a_node_failure_is_a_scheduler_side_failure(slurm) -> None:
    slurm.queue["42"] = NativeState("NODE_FAIL")
    state = slurm.state()
    assert state.status == JobStatus.aborted and state.scheduler_side == "slurm state NODE_FAIL"


def test_a_restarted_run_asks_about_the_jobs_of_all_its_tasks_at_once(monkeypatch) -> None:
    """Re-attaching N tasks whose status query names job ids (HTCondor, LSF) costs one lookup, not N."""
    states = {"7.0": NativeState("2"), "7.1": NativeState("1"), "7.2": NativeState("4", exit_code=0),
              "7.3": NativeState("5", reason="held by the admin")}
    queries: list[list[str]] = []

    def query_states(ids: list[str]) -> dict[str, NativeState]:
        queries.append(ids)
        return {i: states[i] for i in ids if i in states}

    b2batch.set_setting("batch_system", "htcondor")
    run = Run(config=run_config())
    system = run.add_system("htcondor", HTCondorSystem)
    monkeypatch.setattr(system, "query_states", query_states)
    jobs = [make_job(run, Sleepy(n=n)) for n in range(6)]
    for n, job in enumerate(jobs):  # the journals a killed steering process left (7.4 and 7.5 are forgotten)
        job.files.record_submission("htcondor", f"7.{n}")
    done = make_job(run, Sleepy(n=9))  # a job that wrote its exit code is not asked about
    done.files.record_submission("htcondor", "6.0")
    done.files.exit_code.write_text("0\n")

    attached = [system.attach(job, job.files.read_submission()) for job in jobs]
    # running and idle jobs are followed; a completed one, an unknown one and a held one (final) are not
    assert attached == [True, True, False, False, False, False]
    assert len(queries) == 1 and sorted(queries[0]) == [f"7.{n}" for n in range(6)]
    assert system.monitor.tracked == {"7.0", "7.1"}
    # what was heard of a job the steering process cancels itself is forgotten: it is asked about again
    monkeypatch.setattr("b2batch.systems.command_runner.run_with_retries", lambda *a, **k: None)
    system.cancel([jobs[0]])
    states["7.0"] = NativeState("3", reason="removed by user")
    assert system.attach(jobs[0], {"job_id": "7.0"}) is False
