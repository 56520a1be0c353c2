"""``b2batch status`` and ``b2batch cancel`` of a default-settings run, whose short tasks go to pilot jobs
(``job_shape`` auto), on the real Slurm and SGE and the HTCondor and LSF emulators: every task has its real
state (in a pilot: the pilot's batch job id and node; waiting: for a pilot), and cancel ends the pilots, with
one cancel command per batch system, and the run with its summary."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import clean_env
from helpers.clusters import need_real_cluster

SYSTEMS = [pytest.param("slurm", marks=[pytest.mark.slurm, pytest.mark.slow]),
           pytest.param("sge", marks=[pytest.mark.sge, pytest.mark.slow]), "lsf", "htcondor"]
EMULATED = ("lsf", "htcondor")
TASKS = 40


def command(system: str, *args: str) -> list[str]:
    """``args`` run under the emulator of ``system`` (HTCondor, LSF), or as they are (Slurm, SGE)."""
    if system in EMULATED:
        return [sys.executable, "-m", "b2batch", "emulate", system, "--", *args]
    return list(args)


def b2batch(system: str, folder: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command(system, sys.executable, "-m", "b2batch", *args), cwd=folder, env=env,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def look(system: str, folder: Path, env: dict[str, str], script: Path) -> dict[str, dict]:
    done = b2batch(system, folder, env, "status", str(script), "--json")
    assert done.returncode == 0, done.stderr
    return {job["task"]: job for job in json.loads(done.stdout or "[]")}


@pytest.mark.parametrize("system", SYSTEMS)
def test_status_and_cancel_see_the_pilots_of_a_default_run(system: str, workflow, tmp_path: Path,
                                                             request: pytest.FixtureRequest) -> None:
    need_real_cluster(system, request)
    flow = workflow("experience.py")
    (flow.folder / "settings.json").write_text(json.dumps({"poll_interval": 0.3, "max_poll_interval": 1}))
    env = clean_env(B2BATCH_EMULATOR_DIR=str(tmp_path / "emulator"), B2BATCH_EMULATOR_SLOTS="2")
    err = open(tmp_path / "steering.err", "w")
    steering = subprocess.Popen(command(system, *flow.command("--batch", "--batch-system", system, "--count",
                                                               str(TASKS), "--sleep", "2")),
                                cwd=flow.folder, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=err, text=True)
    try:
        deadline = time.monotonic() + 120
        while True:  # until some tasks run in pilots and others wait for them
            found = look(system, flow.folder, env, flow.script)
            states = [job["state"] for job in found.values()]
            if "running" in states and "queued" in states:
                break
            assert steering.poll() is None and time.monotonic() < deadline, found
            time.sleep(0.5)
        assert not {"unknown", "lost", "not submitted"} & set(states), found
        running = [job for job in found.values() if job["state"] == "running"]
        assert all(job["carrier"] == "pilot" and job["job_id"] and job["node"] for job in running), running
        assert all(job["detail"].startswith(f"in pilot job {job['job_id']} on {job['node']} for ") for job in running)
        queued = [job for job in found.values() if job["state"] == "queued"]
        assert all(job["detail"].startswith("waits for a pilot job (") for job in queued), queued
        text = b2batch(system, flow.folder, env, "status", str(flow.script)).stdout
        assert f"Pilot jobs on {system}: " in text, text

        cancelled = b2batch(system, flow.folder, env, "cancel", str(flow.script), "--yes")
        assert cancelled.returncode == 0, cancelled.stdout + cancelled.stderr
        assert "pilot " in cancelled.stdout and "job (no id yet)" not in cancelled.stdout, cancelled.stdout
        ended = time.monotonic()
        steering.wait(timeout=60)
    finally:
        if steering.poll() is None:
            steering.kill()
        err.close()
    stderr = (tmp_path / "steering.err").read_text()
    assert steering.returncode == 1, stderr[-3000:]
    assert "cancelled with b2batch cancel" in stderr and "===== b2batch summary =====" in stderr, stderr[-3000:]
    while True:  # 0 jobs of the run left within 15 s: nothing for a second cancel to find
        again = b2batch(system, flow.folder, env, "cancel", str(flow.script), "--yes")
        if again.stdout.startswith("No queued or running jobs"):
            break
        assert time.monotonic() - ended < 15, again.stdout + again.stderr
        time.sleep(1)
    after = look(system, flow.folder, env, flow.script)
    assert not {"queued", "running", "unknown"} & {job["state"] for job in after.values()}, after


def test_log_report_history_and_monitor_of_a_pilot_run_name_the_same_batch_jobs(workflow, tmp_path: Path) -> None:
    """One identity per batch job: the scheduler's id, in the log, the report's tasks and worker jobs, the
    history's job count and the monitor's pilot line; never-started pilots are counted apart."""
    flow = workflow("experience.py")
    (flow.folder / "settings.json").write_text(json.dumps({"poll_interval": 0.3, "max_poll_interval": 1}))
    env = clean_env(B2BATCH_EMULATOR_DIR=str(tmp_path / "emulator"), B2BATCH_EMULATOR_SLOTS="2")
    done = subprocess.run(command("lsf", *flow.command("--batch", "--batch-system", "lsf", "--count", "16",
                                                       "--sleep", "0.5")),
                          cwd=flow.folder, env=env, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-3000:]
    (report_file,) = (flow.folder / "logs").glob("b2batch-run-*.report.json")
    report = json.loads(report_file.read_text())
    workers = {worker["job_id"]: worker for worker in report["worker_jobs"]}
    logged = set(re.findall(r"lsf: submitted pilot job (\S+) for Part", done.stderr))
    assert logged == set(workers) and workers, (logged, workers)
    parts = [job for job in report["jobs"] if job["family"] == "Part"]
    assert all(job["carrier"].startswith(f"pilot job {job['job_ids'][-1]} on lsf") for job in parts), parts
    assert {job["job_ids"][-1] for job in parts} <= set(workers)
    assert sum(worker["units"] for worker in workers.values()) == len([j for j in report["jobs"] if j["carrier"]])
    own = {job["job_ids"][-1] for job in report["jobs"] if job["job_ids"] and not job["carrier"]}
    pilots = report["totals"]["worker_jobs"]["pilot"]
    started = sum(1 for worker in workers.values() if worker.get("started_at"))
    assert pilots == {"submitted": len(workers), "started": started, "never_started": len(workers) - started}
    assert report["totals"]["batch_jobs"] == len(workers) + len(own)
    history = json.loads(b2batch("lsf", flow.folder, env, "history", str(flow.script), "--json").stdout)
    assert history[-1]["jobs"] == report["totals"]["batch_jobs"]
    monitor = b2batch("lsf", flow.folder, env, "monitor", str(flow.folder / "logs"), "--once").stdout
    assert (f"Pilot jobs: {pilots['submitted']} submitted, {pilots['started']} started, "
            f"{pilots['never_started']} never started; 0 running") in monitor, monitor
