"""The Grid Engine backend against the real single-node SGE of tests/clusters/sge.sh."""

from __future__ import annotations

import json
import re
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from b2batch.errors import SettingError
from b2batch.engine import JobStatus
from b2batch.systems.sge import SGESystem, qsub_options

DATA = Path(__file__).resolve().parents[1] / "data" / "sge"




def test_parse_qstat_xml_running_pending_error_and_arrays() -> None:
    states = SGESystem.parse_status((DATA / "qstat_error_pending.xml").read_text())
    assert states["17"].state == "Eqw" and SGESystem.state_map["Eqw"] == JobStatus.aborted
    assert [f"18.{i}" in states for i in range(5, 21)] == [True] * 16  # the range 5-20:1 expanded
    assert SGESystem.state_map[states["18.5"].state] == JobStatus.idle
    running = SGESystem.parse_status((DATA / "qstat_running.xml").read_text())
    assert {SGESystem.state_map[s.state] for s in running.values()} == {JobStatus.running}
    assert SGESystem.parse_status("") == {}
    for state in ("r", "t", "dr"):
        assert SGESystem.state_map[state] == JobStatus.running


def test_qsub_options_are_validated() -> None:
    assert qsub_options({"queue": "all.q", "pe": "smp 2", "resources": {"h_rt": "00:01:00", "h_vmem": "2G"}},
                        "T") == ["-q", "all.q", "-pe", "smp", "2", "-l", "h_rt=00:01:00,h_vmem=2G"]
    with pytest.raises(SettingError, match="not a qsub option"):
        qsub_options({"walltime": 3}, "T")
    with pytest.raises(SettingError, match="slot"):
        qsub_options({"pe": "smp"}, "T")


def _jobs_named(name: str) -> list[tuple[str, str]]:
    out = subprocess.run(["qstat", "-xml"], capture_output=True, text=True, check=True).stdout
    return [(m.group(1), m.group(3)) for m in re.finditer(
        r"<JB_job_number>(\d+)</JB_job_number>.*?<JB_name>([^<]*)</JB_name>.*?<state>([^<]*)</state>", out, re.S)
        if m.group(2).startswith(name + ".")]


def _wait_for(name: str, state: str, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for job_id, job_state in _jobs_named(name):
            if job_state == state:
                return job_id
        time.sleep(0.3)
    raise AssertionError(f"no job named {name} in state {state} within {timeout} s: {_jobs_named(name)}")


@pytest.mark.sge
def test_successful_workflow(sge: None, workflow) -> None:
    wf = workflow("scheduler_jobs.py")
    done = wf.run("--system", "sge", "--n", "4", timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(list((wf.folder / "results").rglob("out.txt"))) == 4


@pytest.mark.sge
def test_failing_task_reports_exit_code_and_stderr(sge: None, workflow) -> None:
    wf = workflow("scheduler_jobs.py")
    done = wf.run("--system", "sge", "--n", "1", "--mode", "fail", timeout=300)
    assert done.returncode == 1
    assert "exited with code 1" in done.stderr and "deliberate failure of task 0" in done.stderr


@pytest.mark.sge
def test_job_deleted_from_outside_is_aborted(sge: None, workflow) -> None:
    wf = workflow("scheduler_jobs.py")
    name = f"del{uuid.uuid4().hex[:6]}"
    steering = wf.popen("--system", "sge", "--n", "1", "--mode", "sleep", "--seconds", "600", "--job-name", name,
                        stderr=subprocess.PIPE)
    try:
        job_id = _wait_for(name, "r")
        time.sleep(1)
        subprocess.run(["qdel", job_id], check=True, capture_output=True)
        _, stderr = steering.communicate(timeout=120)
    finally:
        steering.kill()
    assert steering.returncode == 1
    assert f"job {job_id} on sge" in stderr, stderr[-3000:]


@pytest.mark.sge
def test_job_in_error_state_is_aborted_with_the_reason_and_removed(sge: None, workflow) -> None:
    blocker = subprocess.run(["qsub", "-terse", "-b", "y", "-wd", "/tmp", "-N", "blocker", "/bin/sleep", "600"],
                             capture_output=True, text=True, check=True).stdout.strip()
    wf = workflow("scheduler_jobs.py")
    name = f"eqw{uuid.uuid4().hex[:6]}"
    steering = wf.popen("--system", "sge", "--n", "1", "--job-name", name, "--system-settings",
                        json.dumps({"hold_jid": blocker}), stderr=subprocess.PIPE)
    try:
        job_id = _wait_for(name, "hqw")
        # The job's working directory disappears while it waits: Grid Engine puts it into Eqw.
        (job_folder,) = (wf.folder / "task_files" / "Work").iterdir()
        job_folder.rename(job_folder.with_name("moved"))
        subprocess.run(["qdel", blocker], check=True, capture_output=True)
        _, stderr = steering.communicate(timeout=120)
    finally:
        steering.kill()
        subprocess.run(["qdel", blocker], capture_output=True)
    assert steering.returncode == 1
    assert "sge state Eqw" in stderr and "can't chdir" in stderr, stderr[-3000:]
    assert not [j for j, _ in _jobs_named(name) if j == job_id], "the job in Eqw was left in the queue"


@pytest.mark.sge
def test_sge_settings_reach_the_job(sge: None, workflow) -> None:
    wf = workflow("scheduler_jobs.py")
    name = f"set{uuid.uuid4().hex[:6]}"
    settings = {"pe": "smp 2", "resources": {"h_rt": "00:05:00"}}
    steering = wf.popen("--system", "sge", "--n", "1", "--mode", "sleep", "--seconds", "600", "--job-name", name,
                        "--system-settings", json.dumps(settings), stderr=subprocess.DEVNULL)
    try:
        job_id = _wait_for(name, "r")
        shown = subprocess.run(["qstat", "-j", job_id], capture_output=True, text=True).stdout
    finally:
        steering.terminate()
        steering.wait(timeout=60)
    assert re.search(r"parallel environment:\s+smp range:\s+2", shown), shown
    assert re.search(r"hard resource_list:\s+h_rt=300", shown), shown
    time.sleep(2)
    assert not _jobs_named(name) or all(s.startswith("d") for _, s in _jobs_named(name))
