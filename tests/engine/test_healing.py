"""Memory and time escalation and bad nodes (docs/policies.md): the policy, the causes read from each batch
system's answer, each system's syntax for an escalated request and an excluded node, and that a default run's
submissions are unchanged. End-to-end runs: tests/e2e/test_healing_runs.py."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from b2batch.engine.jobconfig import NO_SETTINGS
from b2batch.engine import Job, JobFiles, JobOutcome, JobState, JobStatus, NativeState, Run, causes
from b2batch.engine.config import RunConfig
from b2batch.engine.escalation import EscalationPolicy, Request, megabytes, seconds
from b2batch.engine.healing import Healing
from b2batch.engine.system import BatchSystem
from b2batch.systems.htcondor import HTCondorSystem, submit_description
from b2batch.systems.lsf import LSFSystem, bsub_options
from b2batch.systems.sge import SGESystem, qacct_cause, qsub_options
from b2batch.systems.slurm import SlurmSystem, sbatch_options

SYSTEM_SETTINGS = {
    "slurm": ("slurm_settings", {"mem": "2G", "time": "10", "partition": "debug"}),
    "sge": ("sge_settings", {"queue": "all.q", "resources": {"h_vmem": "2G", "h_rt": "00:10:00"}}),
    "htcondor": ("htcondor_settings", {"request_memory": 2048, "+MaxRuntime": 600}),
    "lsf": ("lsf_settings", {"M": "2048", "W": "10", "R": "rusage[mem=2048]"}),
}
CLASSES = {"slurm": SlurmSystem, "sge": SGESystem, "htcondor": HTCondorSystem, "lsf": LSFSystem}


def reason_of(healing: Any, job: Job, state: JobState, system: Any) -> str:
    """What the run's policies make of ``job`` ending in ``state``: its outcome read as the run reads it."""
    return healing.resubmit_reason(job, JobOutcome.read(job.files, state), system)


def make_job(folder: Path, system: str, key: str = "Work_1") -> Job:
    name, value = SYSTEM_SETTINGS[system]
    settings: dict[str, Any] = {name: value, "max_resubmissions": 2, "resubmit_failed_tasks": False,
                                "shell": "bash", "queue": None, "job_slots": None, "transfer_files": [],
                                "htcondor_pool": None, "htcondor_schedd": None, "job_name": None,
                                "task_file_dir": str(folder / "task_files")}
    job = Job(key=key, name=f"Work({key})", family="Work", system=system,
              files=JobFiles.at(folder / "task_files", "Work", key, folder / "logs" / key),
              config=NO_SETTINGS.replace(**settings))
    job.files.make_folders()
    return job


def plain_options(system: str, job: Job) -> list[str]:
    """The options as the system's own option builder makes them, with no policy involved."""
    name, value = SYSTEM_SETTINGS[system]
    if system == "slurm":
        return sbatch_options(value, job)
    if system == "lsf":
        return bsub_options(job)
    if system == "sge":
        return ["-V", "-S", SGESystem(Run()).common_options(job)[2], *qsub_options(value, job)]
    return [json.dumps(value, sort_keys=True), "[]"]


# --- the policy -----------------------------------------------------------------------------------------

def test_sizes_and_durations_are_read_as_batch_systems_write_them() -> None:
    assert megabytes("2G") == 2048 and megabytes("500MB") == 500 and megabytes(4000) == 4000
    assert megabytes("1.5 GiB") == 1536 and megabytes("1024K") == 1
    assert seconds("2h") == 7200 and seconds("01:30:00") == 5400 and seconds("1-00:00:00") == 86400
    assert seconds(90) == 90 and seconds("10:00") == 600
    with pytest.raises(ValueError):
        megabytes("lots")
    with pytest.raises(ValueError):
        seconds("soon")


def test_escalation_multiplies_up_to_the_most_and_then_stops() -> None:
    policy = EscalationPolicy(memory_factor=2, time_factor=1.5, max_memory_mb=5000, max_time_s=1800)
    assert policy.escalate(causes.MEMORY, Request(2048, 600)) == Request(memory_mb=4096)
    assert policy.escalate(causes.MEMORY, Request(4096, 600)) == Request(memory_mb=5000)
    assert policy.escalate(causes.MEMORY, Request(5000, 600)) is None  # at the most: no escalation
    assert policy.escalate(causes.TIME, Request(2048, 600)) == Request(time_s=900)
    assert policy.escalate(causes.TIME, Request(2048, 1500)) == Request(time_s=1800)
    assert policy.escalate(causes.MEMORY, Request(None, 600)) is None  # nothing asked for: nothing to multiply
    assert EscalationPolicy().escalate(causes.MEMORY, Request(2048, 600)) is None  # off by default
    assert not EscalationPolicy().on and RunConfig().max_node_failures == 3


# --- causes from each batch system's answer ----------------------------------------------------------------

def test_causes_are_read_from_each_schedulers_answer() -> None:
    slurm = SlurmSystem.parse_status("1|OUT_OF_MEMORY|OutOfMemory|n1\n2|TIMEOUT|TimeLimit|n2\n3|NODE_FAIL|None|n3\n"
                                     "4|FAILED|NonZeroExitCode|n1\n5|RUNNING|None|")
    system = SlurmSystem(Run())
    assert [system.cause_of(slurm[i]) for i in "1234"] == [causes.MEMORY, causes.TIME, causes.NODE, ""]
    assert slurm["1"].node == "n1" and slurm["5"].node == ""
    bjobs = json.dumps({"RECORDS": [
        {"JOBID": "7", "STAT": "EXIT", "EXIT_CODE": "137", "EXEC_HOST": "4*hostA",
         "EXIT_REASON": "TERM_MEMLIMIT: job killed after reaching LSF memory usage limit"},
        {"JOBID": "8", "STAT": "EXIT", "EXIT_CODE": "140", "EXEC_HOST": "hostB",
         "EXIT_REASON": "TERM_RUNLIMIT: job killed after reaching LSF run time limit"},
        {"JOBID": "9", "STAT": "UNKWN", "EXEC_HOST": "hostC"}]})
    lsf, lsf_system = LSFSystem.parse_status(bjobs), LSFSystem(Run())
    assert [lsf_system.cause_of(lsf[i]) for i in "789"] == [causes.MEMORY, causes.TIME, causes.NODE]
    assert lsf["7"].node == "hostA"
    condor = HTCondorSystem.parse_status(json.dumps([
        {"ClusterId": 1, "ProcId": 0, "JobStatus": 5, "HoldReasonCode": 34, "HoldReason": "memory usage exceeded",
         "LastRemoteHost": "slot1@wn7.example.org"},
        {"ClusterId": 1, "ProcId": 1, "JobStatus": 5, "HoldReasonCode": 46, "HoldReason": "duration exceeded"},
        {"ClusterId": 1, "ProcId": 2, "JobStatus": 3,
         "RemoveReason": "The job attribute PeriodicRemove expression 'RemoteWallClockTime > MaxRuntime' "
                         "evaluated to TRUE"},
        {"ClusterId": 1, "ProcId": 3, "JobStatus": 5, "HoldReason": "via condor_hold (by user me)"}]))
    assert [condor[f"1.{i}"].cause for i in range(4)] == [causes.MEMORY, causes.TIME, causes.TIME, ""]
    assert condor["1.0"].node == "wn7.example.org"
    record = "failed       100 : assumedly after job\nexit_status  137\nmaxvmem      2.000G\nru_wallclock 30s\n"
    assert qacct_cause(record, 137, Request(2048, 600)) == causes.MEMORY
    assert qacct_cause(record.replace("2.000G", "10.000M").replace("30s", "600s"), 137,
                       Request(2048, 600)) == causes.TIME
    assert qacct_cause(record, 1, Request(2048, 600)) == ""  # exited by itself


# --- each system's syntax ----------------------------------------------------------------------------------

@pytest.mark.parametrize("system", ["slurm", "sge", "htcondor", "lsf"])
def test_a_default_run_submits_what_the_settings_say(tmp_path: Path, system: str) -> None:
    run = Run()
    job = make_job(tmp_path, system)
    assert run.add_system(system, CLASSES[system]).common_options(job) == plain_options(system, job)


@pytest.mark.parametrize("system", ["slurm", "sge", "htcondor", "lsf"])
def test_escalated_request_and_excluded_nodes_in_each_systems_syntax(tmp_path: Path, system: str) -> None:
    run = Run(config=RunConfig(retry_memory_factor=2, retry_time_factor=2, max_node_failures=1))
    batch = run.add_system(system, CLASSES[system])
    job = make_job(tmp_path, system)
    assert batch.requested(job) == Request(2048, 600)
    job.job_id = "11"
    killed = JobState(JobStatus.aborted, "killed", cause=causes.MEMORY, node="wn1")
    assert "escalating memory 2 GB -> 4 GB" in reason_of(run.healing, job, killed, batch)
    job.job_id = "12"
    timed_out = JobState(JobStatus.aborted, "killed", cause=causes.TIME, node="wn1")
    assert "escalating time 0:10:00 -> 0:20:00" in reason_of(run.healing, job, timed_out, batch)
    other = make_job(tmp_path, system, key="Work_2")
    reason_of(run.healing, other, JobState(JobStatus.successful, node="wn2"), batch)
    job.job_id = "13"
    lost = JobState(JobStatus.aborted, "node down", scheduler_side="node down", cause=causes.NODE, node='wn1"; x')
    reason_of(run.healing, job, lost, batch)  # a name unsafe in a submit file is never written
    reason_of(run.healing, job, JobState(JobStatus.aborted, "node down", "node down", causes.NODE, "wn1"), batch)
    assert run.healing.excluded(system) == ('wn1"; x', "wn1") and batch.excluded_nodes() == ("wn1",)
    options = batch.common_options(job)
    expected = {
        "slurm": ["--partition=debug", "--mem=4096M", "--time=00:20:00", "--exclude=wn1"],
        "sge": ["-q", "all.q", "-l", "h_vmem=4096M,h_rt=0:20:00,h=!wn1"],
        "lsf": ["-M", "4096MB", "-W", "0:20", "-R", "rusage[mem=2048] select[hname!=wn1]"],
    }
    if system == "htcondor":
        text = submit_description(job, "/bin/true", str(tmp_path), "b2b", config=run.config,
                                  overlay=batch.overlay(job))  # parsed by HTCondor's own bindings
        assert "request_memory = 4096" in text and "+MaxRuntime = 1200" in text
        assert 'requirements = (Machine != "wn1")' in text
    else:
        assert options[-len(expected[system]):] == expected[system], options
    assert [e["text"] for e in run.record.policies["escalations"]] == [
        f"Work(Work_1) on {system}: memory 2 GB -> 4 GB (out of memory, job 11)",
        f"Work(Work_1) on {system}: time 0:10:00 -> 0:20:00 (time limit, job 12)"]


def test_a_node_is_excluded_only_while_another_node_works(tmp_path: Path) -> None:
    run = Run(config=RunConfig(max_node_failures=2))
    batch = run.add_system("slurm", SlurmSystem)
    healing: Healing = run.healing
    job = make_job(tmp_path, "slurm")
    job.files.setup_failed.write_text("cannot change into working_dir /gone\n")
    job.files.exit_code.write_text("3\n")
    setup_failure = JobState(JobStatus.aborted, "exit 3", node="bad1")
    # No other node has worked yet: a set-up failure may be everyone's (a broken env_script): not resubmitted.
    for number in range(3):
        job.job_id = str(number)
        job.files._exit = None
        assert reason_of(healing, job, setup_failure, batch) == ""
    assert healing.excluded("slurm") == ()
    reason_of(healing, make_job(tmp_path, "slurm", "Work_2"), JobState(JobStatus.successful, node="good1"),
                            batch)
    assert healing.excluded("slurm") == ("bad1",)  # counted failures, now that another node worked
    job.job_id = "4"
    assert reason_of(healing, job, setup_failure, batch).startswith("node failure on bad1")
    entry = run.record.policies["node_failures"][0]
    assert entry["node"] == "bad1" and entry["failures"] == 4 and entry["excluded"]
    assert "set-up failed: cannot change into working_dir" in entry["text"]
    off = Run(config=RunConfig(max_node_failures=0))
    off_system = off.add_system("slurm", SlurmSystem)
    assert reason_of(off.healing, job, setup_failure, off_system) == "" and not off.record.policies[
        "node_failures"]


class Nodes(BatchSystem):
    """Each job ends at the next poll on the node its script gives, as the script says: "lost" (no exit code:
    the wrapper never ran, a lost mount) or "ok"."""

    name = "slurm"

    def __init__(self, run: Run) -> None:
        super().__init__(run)
        self.script: dict[str, list[tuple[str, str]]] = {}  # key -> (node, how) per submission, in order
        self.submitted: list[tuple[str, str]] = []  # (key, excluded nodes when submitted)
        self.held: list[Job] = []  # jobs that stay running until released

    def submit(self, group: list[Job]) -> None:
        for job in group:
            job.job_id = f"{job.key}.{len(self.submitted)}"
            self.submitted.append((job.key, ",".join(self.run.healing.excluded(self.name))))

    def states(self, jobs) -> dict[Job, JobState]:
        answer = {}
        for job in list(jobs):
            if job in self.held:
                continue
            node, how = self.script[job.key].pop(0)
            if how == "ok":
                job.files.exit_code.write_text("0\n")
                answer[job] = JobState(JobStatus.successful, node=node)
            else:
                answer[job] = JobState(JobStatus.aborted, "exit 127", node=node)
        return answer

    def cancel(self, jobs: list[Job]) -> None:
        pass


def _drive(run: Run, jobs: list[Job], release=None) -> dict[str, Job]:
    for job in jobs:
        run.submit(job)
    ended: dict[str, Job] = {}
    for _ in range(50):
        for job in run.poll():
            ended[job.key] = job
        if release is not None:
            release(ended)
        if not run.live:
            break
    return ended


def test_jobs_failed_by_a_bad_node_before_any_other_worked_wait_for_the_verdict_and_go_again(tmp_path: Path) -> None:
    run = Run(config=RunConfig(max_node_failures=2))
    system: Nodes = run.add_system("slurm", Nodes)
    jobs = [make_job(tmp_path, "slurm", f"Work_{i}") for i in range(4)]
    # Work_0 and Work_1 land on the bad node first and lose their files there, before any other node has run a
    # job to its end; Work_2 works on a good node a poll later (held one poll); each goes again and works.
    for key in ("Work_0", "Work_1"):
        system.script[key] = [("bad1", "lost"), ("good1", "ok")]
    system.script["Work_2"] = [("good1", "ok")]
    system.script["Work_3"] = [("good1", "ok")]
    system.held = [jobs[2]]
    polls = []

    def release(ended: dict[str, Job]) -> None:
        polls.append(sorted(ended))
        if len(polls) == 2:
            system.held.clear()

    ended = _drive(run, jobs, release)
    assert sorted(ended) == ["Work_0", "Work_1", "Work_2", "Work_3"]
    assert all(job.outcome.status == JobStatus.successful for job in ended.values()), {
        k: j.outcome for k, j in ended.items()}
    assert polls[0] == ["Work_3"]  # the two lost jobs were not handed back as failed: parked
    assert [k for k, _ in system.submitted].count("Work_0") == 2
    assert run.record.jobs["Work_0"].resubmissions[0].startswith("node failure on bad1")
    assert system.submitted[-1][1] == "bad1"  # excluded (2 failures, and good1 worked) before they went again


def test_a_one_node_cluster_still_fails_such_jobs_once_nothing_else_runs(tmp_path: Path) -> None:
    run = Run(config=RunConfig(max_node_failures=2))
    system: Nodes = run.add_system("slurm", Nodes)
    jobs = [make_job(tmp_path, "slurm", f"Work_{i}") for i in range(2)]
    for job in jobs:
        system.script[job.key] = [("only1", "lost")]
    ended = _drive(run, jobs)
    assert sorted(ended) == ["Work_0", "Work_1"]
    assert all(job.outcome.status == JobStatus.aborted and job.resubmissions == 0 for job in ended.values())
    assert len(system.submitted) == 2 and run.healing.excluded("slurm") == ()


def test_on_one_node_a_job_without_its_exit_code_goes_again_once_that_node_ends_a_later_job_well(
        tmp_path: Path) -> None:
    """slurmd restarted under a running job (CI BJ): the job ends without its exit code; the same, only node then
    runs another job well. That clears it as another node's success would: the job goes again and works."""
    run = Run(config=RunConfig(max_node_failures=3))
    system: Nodes = run.add_system("slurm", Nodes)
    jobs = [make_job(tmp_path, "slurm", f"Work_{i}") for i in range(2)]
    system.script["Work_0"] = [("only1", "lost"), ("only1", "ok")]
    system.script["Work_1"] = [("only1", "ok")]
    system.held = [jobs[1]]  # runs on while Work_0 is lost; ends well a poll later
    polls = []

    def release(ended: dict[str, Job]) -> None:
        polls.append(sorted(ended))
        system.held.clear()

    ended = _drive(run, jobs, release)
    assert polls[0] == []  # Work_0 was parked, not handed back as failed
    assert all(job.outcome.status == JobStatus.successful for job in ended.values()), {
        k: j.outcome for k, j in ended.items()}
    assert [k for k, _ in system.submitted].count("Work_0") == 2
    assert run.record.jobs["Work_0"].resubmissions[0].startswith("node failure on only1 (the job ended without")
    assert run.healing.excluded("slurm") == ()


def test_a_good_end_on_the_same_node_before_the_lost_job_started_clears_nothing(tmp_path: Path) -> None:
    run = Run(config=RunConfig(max_node_failures=3))
    system = run.add_system("slurm", SlurmSystem)
    done, lost = make_job(tmp_path, "slurm", "Work_0"), make_job(tmp_path, "slurm", "Work_1")
    run.healing.nodes.failures[("slurm", "only1")] = []  # watched: good ends are read
    done.files.exit_code.write_text("0\n")
    os.utime(done.files.exit_code, (1000.0, 1000.0))
    assert reason_of(run.healing, done, JobState(JobStatus.successful, node="only1"), system) == ""
    lost.files.stdout.parent.mkdir(parents=True, exist_ok=True)
    lost.files.stdout.write_text("b2batch: job of task Work_1 started on only1 at 1970-01-01T00:20:00+00:00\n")
    assert reason_of(run.healing, lost, JobState(JobStatus.aborted, "lost", node="only1"), system) == ""
    assert run.healing.suspected(lost) and run.healing.parked_reason(lost) == ""
    # A set-up failure on that node is not cleared by the node's own good ends, even later ones.
    setup = make_job(tmp_path, "slurm", "Work_2")
    setup.files.setup_failed.write_text("cannot change into working_dir /gone\n")
    setup.files.exit_code.write_text("3\n")
    assert reason_of(run.healing, setup, JobState(JobStatus.aborted, "exit 3", node="only1"), system) == ""
    run.healing.node_works("slurm", "only1", at=time.time() + 10)
    assert run.healing.parked_reason(setup) == ""
    assert run.healing.parked_reason(lost).startswith("node failure on only1")


def test_slurm_moves_its_pending_jobs_off_an_excluded_node(tmp_path: Path, monkeypatch) -> None:
    import b2batch.systems.slurm as slurm

    run = Run(config=RunConfig(max_node_failures=1))
    system = run.add_system("slurm", SlurmSystem)
    seen: list[list[str]] = []
    monkeypatch.setattr(slurm.command_runner, "run", lambda command, **kw: seen.append(command))
    answers = {"100": "PENDING", "200_1": "PENDING", "200_2": "PENDING", "300": "RUNNING", "400": "PENDING"}
    for job_id, state in answers.items():
        job = make_job(tmp_path, "slurm", f"Work_{job_id}")
        if job_id == "400":  # the task's own exclude stays
            job.config = job.config.replace(slurm_settings={"exclude": "x9"})
        system._by_id[job_id] = job
        system.monitor.states[job_id] = NativeState(state=state)
    run._avoid_nodes("slurm", ("bad1",))
    assert sorted(seen) == [["scontrol", "update", "JobId=100,200", "ExcNodeList=bad1"],
                            ["scontrol", "update", "JobId=400", "ExcNodeList=x9,bad1"]]
    # and the run does so when healing excludes a node
    seen.clear()
    job = make_job(tmp_path, "slurm", "Work_9")
    job.files.setup_failed.write_text("cannot change into working_dir /gone\n")
    job.files.exit_code.write_text("3\n")
    run.healing.node_works("slurm", "good1")
    reason_of(run.healing, job, JobState(JobStatus.aborted, "exit 3", node="bad2"), system)
    assert [c[-1] for c in seen] == ["ExcNodeList=bad2", "ExcNodeList=x9,bad2"]


def test_a_suspicion_holds_for_the_end_that_raised_it_only(tmp_path: Path) -> None:
    run = Run(config=RunConfig(max_node_failures=3))
    system = run.add_system("slurm", SlurmSystem)
    job = make_job(tmp_path, "slurm")
    assert reason_of(run.healing, job, JobState(JobStatus.aborted, "lost", node="bad1"), system) == ""
    assert run.healing.suspected(job)  # no exit code, no other node seen: the run would park it
    # It went again for another reason (e.g. resubmit_failed_tasks); its next end is the task's own failure.
    job.files.exit_code.write_text("1\n")
    assert reason_of(run.healing, job, JobState(JobStatus.aborted, "exit 1", node="good1"), system) == ""
    assert not run.healing.suspected(job)
