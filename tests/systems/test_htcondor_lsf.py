"""The HTCondor and LSF backends, end to end against b2batch's emulators, with every injected failure."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from b2batch.engine import JobStatus
from b2batch.systems.htcondor import HTCondorSystem
from b2batch.systems.lsf import LSFSystem

from conftest import clean_env
from helpers.emulated import Emulated

DATA = Path(__file__).resolve().parents[1] / "data"


def test_parse_recorded_condor_outputs() -> None:
    queue = HTCondorSystem.parse_status((DATA / "htcondor" / "condor_q_running.json").read_text())
    assert HTCondorSystem.state_map[queue["16.0"].state] == JobStatus.running
    assert HTCondorSystem.state_map[queue["16.1"].state] == JobStatus.idle
    assert queue["17.0"].state == "5" and "memory limit" in queue["17.0"].reason
    history = HTCondorSystem.parse_status((DATA / "htcondor" / "condor_history_completed.json").read_text())
    assert history["15.0"].exit_code == 0 and history["15.1"].exit_code == 1
    assert history["14.0"].state == "3" and "condor_rm" in history["14.0"].reason
    assert HTCondorSystem.parse_status("") == {}  # condor_q prints nothing when nothing matches
    assert set(HTCondorSystem.state_map) == {str(i) for i in range(1, 8)}


def test_parse_recorded_bjobs_output() -> None:
    states = LSFSystem.parse_status((DATA / "lsf" / "bjobs_mixed.json").read_text())
    assert LSFSystem.state_map[states["123"].state] == JobStatus.successful
    assert states["124"].exit_code == 1 and LSFSystem.state_map["EXIT"] == JobStatus.aborted
    assert states["127[2]"].exit_code == 143
    assert LSFSystem.parse_status((DATA / "lsf" / "bjobs_empty.json").read_text()) == {}
    for stat in ("PEND", "PROV", "PSUSP", "RUN", "USUSP", "SSUSP", "DONE", "EXIT", "UNKWN", "WAIT", "ZOMBI"):
        assert stat in LSFSystem.state_map


@pytest.fixture(params=["htcondor", "lsf"])
def emulated(request, workflow, tmp_path: Path) -> Emulated:
    return Emulated(request.param, workflow("scheduler_jobs.py"), tmp_path)


def test_successful_workflow(emulated: Emulated) -> None:
    done = emulated.run("--n", "3")
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(emulated.outputs()) == 3


def test_failing_task(emulated: Emulated) -> None:
    done = emulated.run("--n", "1", "--mode", "fail")
    assert done.returncode == 1
    assert "exited with code 1" in done.stderr and "deliberate failure of task 0" in done.stderr


def test_submissions_failing_three_times_then_working(emulated: Emulated) -> None:
    emulated.inject("fail-submits", "3")
    done = emulated.run("--n", "1")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr.count("trying again") == 3 and len(emulated.outputs()) == 1


def test_submissions_that_keep_failing_end_in_one_clear_error(emulated: Emulated) -> None:
    emulated.inject("fail-submits", "20")
    done = emulated.run("--n", "1")
    assert done.returncode == 1
    assert f"could not be submitted to {emulated.system}" in done.stderr and "kept failing for 8 s" in done.stderr


def test_lost_job_is_aborted_when_no_resubmission_is_left(emulated: Emulated) -> None:
    emulated.settings(output_wait_timeout=3, max_resubmissions=0)
    steering = emulated.popen("--n", "1", "--mode", "sleep", "--seconds", "600")
    try:
        job_id = emulated.wait_for_running_job()
        emulated.inject("lose", job_id)
        _, stderr = steering.communicate(timeout=120)
    finally:
        steering.kill()
    assert steering.returncode == 1
    assert f"job {job_id} on {emulated.system}" in stderr, stderr[-3000:]
    assert not emulated.outputs()


def test_lost_job_is_submitted_again_and_succeeds(emulated: Emulated) -> None:
    steering = emulated.popen("--n", "1", "--mode", "sleep", "--seconds", "4")
    try:
        job_id = emulated.wait_for_running_job()
        emulated.inject("lose", job_id)
        _, stderr = steering.communicate(timeout=120)
    finally:
        steering.kill()
    assert steering.returncode == 0, stderr[-3000:]
    assert f"Job {job_id}: " in stderr and "submitting task Work(i=0, mode=sleep, seconds=4) again (1 of 2)" in stderr
    assert len(emulated.outputs()) == 1
    assert stderr.count("submitted task Work") == 2  # the lost job and its replacement, nothing more


def test_job_killed_from_outside_is_aborted(emulated: Emulated) -> None:
    steering = emulated.popen("--n", "1", "--mode", "sleep", "--seconds", "600")
    try:
        job_id = emulated.wait_for_running_job()
        kill = ["condor_rm", job_id] if emulated.system == "htcondor" else ["bkill", job_id]
        assert emulated.tool(*kill).returncode == 0
        _, stderr = steering.communicate(timeout=120)
    finally:
        steering.kill()
    assert steering.returncode == 1
    if emulated.system == "htcondor":
        assert "JobStatus 3 (Removed)" in stderr, stderr[-3000:]
    else:
        assert "lsf state EXIT" in stderr, stderr[-3000:]


def test_delayed_state_changes(emulated: Emulated) -> None:
    emulated.inject("delay", "2")
    done = emulated.run("--n", "2")
    assert done.returncode == 0, done.stderr[-3000:]


def test_job_ending_without_running(emulated: Emulated) -> None:
    emulated.inject("exit-next", "1", "--code", "2")
    done = emulated.run("--n", "1")
    assert done.returncode == 1
    assert "ended without an exit code" in done.stderr


def test_held_job_is_submitted_again(workflow, tmp_path: Path) -> None:
    emulated = Emulated("htcondor", workflow("scheduler_jobs.py"), tmp_path)
    emulated.inject("hold-next", "1", "--reason", "Failed to transfer files")
    done = emulated.run("--n", "1")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "JobStatus 5 (Held): Failed to transfer files; submitting task" in done.stderr
    assert len(emulated.outputs()) == 1


def test_held_job_fails_with_its_hold_reason_and_leaves_the_queue(workflow, tmp_path: Path) -> None:
    emulated = Emulated("htcondor", workflow("scheduler_jobs.py"), tmp_path)
    emulated.inject("hold-next", "3", "--reason", "Job has gone over memory limit of 2048 megabytes")
    done = emulated.run("--n", "1")
    assert done.returncode == 1
    assert "JobStatus 5 (Held): Job has gone over memory limit of 2048 megabytes" in done.stderr
    assert not emulated.tool("condor_q", "-json").stdout.strip()


def active_jobs(emulated: Emulated) -> list[str]:
    """The emulated queue's idle and running jobs."""
    if emulated.system == "htcondor":
        out = emulated.tool("condor_q", "-json", "-attributes", "ClusterId,ProcId,JobStatus").stdout
        return [f"{ad['ClusterId']}.{ad['ProcId']}" for ad in (json.loads(out) if out.strip() else [])
                if ad["JobStatus"] in (1, 2)]
    out = json.loads(emulated.tool("bjobs", "-json", "-o", "jobid stat").stdout)
    return [r["JOBID"] for r in out["RECORDS"] if r.get("STAT") in ("PEND", "RUN")]


@pytest.mark.slow
def test_ctrl_c_under_the_emulate_wrapper_reaches_the_workflow_once(emulated: Emulated) -> None:
    """A Ctrl-C in the terminal goes to the whole foreground process group: the wrapper must let the workflow
    cancel its jobs and write its summary, and wait for it."""
    import os
    import signal

    steering = subprocess.Popen(emulated.command("--n", "4", "--mode", "sleep", "--seconds", "120"),
                                cwd=emulated.wf.folder, env=emulated.env, text=True, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        emulated.wait_for_running_job()
        os.killpg(steering.pid, signal.SIGINT)
        _, stderr = steering.communicate(timeout=120)
    finally:
        steering.kill()
    assert steering.returncode == 130, stderr[-3000:]
    assert "Interrupted by SIGINT: killed 4 running job(s)" in stderr, stderr[-3000:]
    assert "===== b2batch summary =====" in stderr and "Traceback" not in stderr, stderr[-3000:]
    assert any((emulated.wf.folder / "logs").glob("b2batch-run-*.report.json"))
    assert active_jobs(emulated) == []


def test_the_summary_keeps_what_the_batch_system_said_of_a_rejected_job(workflow, tmp_path: Path) -> None:
    emulated = Emulated("lsf", workflow("scheduler_jobs.py"), tmp_path)
    done = emulated.run("--n", "1", "--system-settings", json.dumps({"W": "soon"}))
    assert done.returncode == 1
    summary = done.stderr[done.stderr.index("===== b2batch summary ====="):]
    assert "not submitted to lsf" in summary and "Bad RUNLIMIT specification" in summary, summary
    assert "stdout: " + str(tmp_path) not in summary  # no log paths of a job that never ran
