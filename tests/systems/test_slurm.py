"""The Slurm backend against the real single-node Slurm of tests/clusters/slurm.sh."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import uuid
from types import SimpleNamespace
from pathlib import Path

import pytest

from b2batch.errors import SettingError
from b2batch.engine import JobStatus
from b2batch.systems.slurm import SlurmSystem, sbatch_options

DATA = Path(__file__).resolve().parents[1] / "data" / "slurm"




# --- parsing and options, no cluster needed -----------------------------------------------------------

def test_parse_squeue_output_maps_every_state() -> None:
    states = SlurmSystem.parse_status((DATA / "squeue_mixed.txt").read_text())
    assert states["313_4"].state == "PENDING" and states["313_4"].reason == "Resources"
    assert states["315"].reason == "TimeLimit"
    expected = {"311": JobStatus.successful, "312": JobStatus.running, "313_4": JobStatus.idle,
                "314": JobStatus.aborted, "315": JobStatus.aborted, "316": JobStatus.aborted,
                "317": JobStatus.idle, "318": JobStatus.running, "319": JobStatus.aborted}
    for job_id, status in expected.items():
        assert SlurmSystem.state_map[states[job_id].state] == status, job_id
    assert "FUTURE_STATE" not in SlurmSystem.state_map  # unknown: handled by the base class, no crash


def test_sbatch_options_are_validated() -> None:
    assert sbatch_options({"cpus-per-task": 2, "mem": "2G", "c": 3, "requeue": True, "hold": False}, "T") == [
        "--cpus-per-task=2", "--mem=2G", "--cpus-per-task=3", "--requeue"]
    with pytest.raises(SettingError, match="cpus-per-tsk.*Did you mean cpus-per-task"):
        sbatch_options({"cpus-per-tsk": 2}, "T")
    with pytest.raises(SettingError, match="b2batch sets itself"):
        sbatch_options({"output": "x"}, "T")
    with pytest.raises(SettingError, match="must be a dict"):
        sbatch_options(["--mem=1G"], "T")


# --- real jobs ------------------------------------------------------------------------------------------

def _jobs_named(name: str) -> list[tuple[str, str]]:
    out = subprocess.run(["squeue", "--noheader", "--states=all", "--format=%i|%j|%T", "--user=root"],
                         capture_output=True, text=True, check=True).stdout
    return [(i, s) for i, j, s in (line.split("|") for line in out.split()) if j.startswith(name + ".")]


def _wait_for_running(name: str, count: int, timeout: float = 60) -> list[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        running = [i for i, s in _jobs_named(name) if s == "RUNNING"]
        if len(running) >= count:
            return running
        time.sleep(0.5)
    raise AssertionError(f"no {count} running jobs named {name} within {timeout} s: {_jobs_named(name)}")


@pytest.mark.slurm
def test_successful_workflow(slurm: None, workflow) -> None:
    wf = workflow("scheduler_jobs.py")
    done = wf.run("--system", "slurm", "--n", "4", timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    outputs = sorted((wf.folder / "results").rglob("out.txt"))
    assert len(outputs) == 4
    assert re.findall(r"Job (\d+(?:_\d+)?): submitted task Work", done.stderr)


@pytest.mark.slurm
def test_failing_task_reports_exit_code_and_stderr(slurm: None, workflow) -> None:
    wf = workflow("scheduler_jobs.py")
    done = wf.run("--system", "slurm", "--n", "1", "--mode", "fail", timeout=300)
    assert done.returncode == 1
    assert "Task Work (i=0, mode=fail, seconds=0) failed: job" in done.stderr
    assert "exited with code 1" in done.stderr
    assert "deliberate failure of task 0" in done.stderr  # the end of the job's stderr
    assert "stderr: " in done.stderr and not list((wf.folder / "results").rglob("out.txt"))


# A job over its time limit ends TIMEOUT: tests/e2e/test_reliability_restart.py (Slurm's limit is a whole minute,
# so one test waits for it).


@pytest.mark.slurm
def test_job_cancelled_from_outside_is_aborted(slurm: None, workflow) -> None:
    wf = workflow("scheduler_jobs.py")
    name = f"cancel{uuid.uuid4().hex[:6]}"
    steering = wf.popen("--system", "slurm", "--n", "1", "--mode", "sleep", "--seconds", "600",
                        "--job-name", name, stderr=subprocess.PIPE)
    try:
        (job_id,) = _wait_for_running(name, 1)
        subprocess.run(["scancel", job_id], check=True)
        _, stderr = steering.communicate(timeout=120)
    finally:
        steering.kill()
    assert steering.returncode == 1
    assert "slurm state CANCELLED" in stderr, stderr[-3000:]


@pytest.mark.slurm
def test_slurm_settings_reach_the_job(slurm: None, workflow) -> None:
    wf = workflow("scheduler_jobs.py")
    name = f"settings{uuid.uuid4().hex[:6]}"
    steering = wf.popen("--system", "slurm", "--n", "1", "--mode", "sleep", "--seconds", "600",
                        "--job-name", name, "--system-settings", json.dumps({"cpus-per-task": 2, "mem": "500M"}),
                        stderr=subprocess.DEVNULL)
    try:
        (job_id,) = _wait_for_running(name, 1)
        shown = subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True).stdout
    finally:
        steering.terminate()  # SIGTERM: the steering process cancels its jobs
        steering.wait(timeout=60)
    assert "NumCPUs=2" in shown and "CPUs/Task=2" in shown, shown
    assert re.search(r"MinMemory(Node|CPU)=500M", shown), shown
    time.sleep(1)
    assert all(state != "RUNNING" for _, state in _jobs_named(name)), "SIGTERM left the job running"


@pytest.mark.slurm
def test_pilots_told_to_end_are_woken_from_their_idle_pause(slurm: None, tmp_path: Path) -> None:
    """SlurmSystem.wake_to_end (the run closes): one `scancel --signal=CONT --full` ends the idle pause of a
    worker in a real job, which waits in the batch step's child process as a pilot does (IdleWait), at once
    rather than after its pause, each time; a wake for new units sends nothing (SIGCONT would resume a pilot
    the scheduler suspended); a job that ended meanwhile fails nothing."""
    from b2batch.engine import Run

    said = tmp_path / "said"
    script = tmp_path / "idle.py"
    script.write_text(
        "import sys, time\nfrom b2batch.engine.pilots.idle_wait import IdleWait\nwait = IdleWait()\n"
        "for n in (1, 2):\n    open(sys.argv[1], 'a').write(f'waiting {n}\\n')\n    wait.wait(120)\n"
        "    open(sys.argv[1], 'a').write(f'woken {n}\\n')\n")
    job_id = subprocess.run(["sbatch", "--parsable", f"--job-name=b2bwake{uuid.uuid4().hex[:6]}", "-o", "/dev/null",
                             f"--chdir={tmp_path}", "--wrap", f"{sys.executable} {script} {said}"],
                            capture_output=True, text=True, check=True).stdout.strip()

    def until(text: str) -> None:
        deadline = time.monotonic() + 60  # (the worker's pauses are 120 s)
        while not (said.exists() and text in said.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert said.exists() and text in said.read_text(), (text, said.read_text() if said.exists() else "")

    try:
        until("waiting 1")
        system = SlurmSystem(Run())
        job = SimpleNamespace(job_id=job_id)
        system.wake([job])  # units came: nothing sent
        assert system.run.record.scheduler_calls["scancel"] == 0
        system.wake_to_end([job])
        until("woken 1")
        until("waiting 2")
        assert system.run.record.scheduler_calls["scancel"] == 1
        system.wake_to_end([job])
        until("woken 2")
        assert system.run.record.scheduler_calls["scancel"] == 2

        def state() -> str:
            return subprocess.run(["squeue", "--noheader", "--states=all", "--format=%T", "-j", job_id],
                                  capture_output=True, text=True).stdout.strip()

        deadline = time.monotonic() + 60
        while state() in ("RUNNING", "COMPLETING") and time.monotonic() < deadline:
            time.sleep(0.2)
        system.wake_to_end([job])  # the job has ended: scancel says so, and nothing fails
        assert system.run.record.scheduler_calls["scancel"] == 3
    finally:
        subprocess.run(["scancel", job_id], capture_output=True)
