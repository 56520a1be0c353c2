"""``b2batch farm`` as pilot jobs through the engine: local jobs, the HTCondor and LSF emulators, the real Slurm
and SGE; a pilot killed mid-line, and the Slurm options of self-requeueing pilots."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from conftest import clean_env, wait_for

from b2batch.engine import Run
from b2batch.farm.command_line import add_arguments


def write_list(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


def ids_in(path: Path) -> list[int]:
    return [int(line.split(" ", 1)[0]) for line in path.read_text().splitlines()] if path.exists() else []


def farm_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "b2batch", "farm", *args]


def env_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    (tmp_path / "home").mkdir(exist_ok=True)
    return clean_env(HOME=str(tmp_path / "home"), **extra)


def settings(folder: Path, **values: object) -> None:
    import json

    (folder / "settings.json").write_text(json.dumps({"output_wait_timeout": 5, **values}))


def test_pilots_on_local_jobs_run_every_line_and_report_failures(tmp_path: Path) -> None:
    settings(tmp_path)
    write_list(tmp_path / "t.txt", ["echo $PROC_NUMBER >> runs; test $PROC_NUMBER != 5" for _ in range(12)])
    done = subprocess.run(farm_command("t.txt", "--batch-system", "local", "--jobs", "2", "--proc", "2"),
                          cwd=tmp_path, env=env_for(tmp_path), capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(int(x) for x in (tmp_path / "runs").read_text().split()) == list(range(12))
    work = tmp_path / "t.txt_workdir"
    assert sorted(ids_in(work / "finished")) == [i for i in range(12) if i != 5] and ids_in(work / "failed") == [5]
    assert "lines: toprocess" in done.stdout and "pilots ended 2" in done.stdout
    assert "task 5 (line 6 of t.txt): echo $PROC_NUMBER >> runs; test $PROC_NUMBER != 5  [exit code 1;" in done.stdout
    pilots = sorted((work / "b2batch" / "jobs" / "pilots").iterdir())
    assert [p.name for p in pilots] == ["pilot-0", "pilot-1"]
    assert all((p / "exit_code").read_text().strip() == "0" for p in pilots)


def test_submit_only_needs_a_real_batch_system(tmp_path: Path) -> None:
    write_list(tmp_path / "t.txt", ["true"])
    done = subprocess.run(farm_command("t.txt", "--batch-system", "local", "--submit-only"), cwd=tmp_path,
                          env=env_for(tmp_path), capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 2 and "--submit-only needs a batch system" in done.stderr


def test_a_pilot_killed_mid_line_has_that_line_run_again_once(tmp_path: Path) -> None:
    settings(tmp_path, heartbeat_timeout=10)
    lines = [f"echo start $PROC_NUMBER >> runs; sleep {3 if i == 2 else 0.3}; echo end $PROC_NUMBER >> runs"
             for i in range(6)]
    write_list(tmp_path / "t.txt", lines)
    steering = subprocess.Popen(farm_command("t.txt", "--batch-system", "local", "--jobs", "2", "--proc", "1"),
                                cwd=tmp_path, env=env_for(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
    try:
        def farmer_running_line_2() -> psutil.Process | None:
            for process in psutil.process_iter(["cmdline"]):
                cmdline = process.info["cmdline"] or []
                try:
                    if ("--pilot" in cmdline and str(tmp_path) in " ".join(cmdline)
                            and any("sleep 3" in " ".join(c.cmdline()) for c in process.children(recursive=True))):
                        return process
                except psutil.Error:  # a process (or child) that ended, or a zombie, while we looked
                    continue
            return None

        farmer = wait_for(farmer_running_line_2, 60, "a pilot running line 2")
        farmer.send_signal(signal.SIGKILL)
        out, err = steering.communicate(timeout=120)
    finally:
        steering.kill()
    assert steering.returncode == 0, out + err
    marks = [line.split() for line in (tmp_path / "runs").read_text().splitlines()]
    assert sorted(int(i) for what, i in marks if what == "end") == list(range(6)), marks
    assert [int(i) for what, i in marks if what == "start"].count(2) == 2  # killed once, run again once
    assert sorted(ids_in(tmp_path / "t.txt_workdir" / "finished")) == list(range(6))
    assert "exited with code 137" in err or "killed by SIGKILL" in err  # the killed pilot is reported


@pytest.mark.parametrize("system", ["htcondor", "lsf"])
def test_pilots_on_the_emulators(tmp_path: Path, system: str) -> None:
    settings(tmp_path, scheduler_unreachable_timeout=30)
    write_list(tmp_path / "t.txt", ["echo line $PROC_NUMBER" for _ in range(8)])
    env = env_for(tmp_path, B2BATCH_EMULATOR_DIR=str(tmp_path / "emulator"), B2BATCH_EMULATOR_SLOTS="4")
    done = subprocess.run([sys.executable, "-m", "b2batch", "emulate", system, "--",
                           *farm_command("t.txt", "--batch-system", system, "--jobs", "2", "--proc", "2")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, check=False, timeout=180)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert sorted(ids_in(tmp_path / "t.txt_workdir" / "finished")) == list(range(8))
    assert (tmp_path / "t.txt_workdir" / "logs" / "log_7").read_text() == "line 7\n"


def test_slurm_pilots_requeue_themselves(tmp_path: Path, monkeypatch) -> None:
    """The sbatch command of a pilot: --requeue and USR1 before the time limit, the user's options kept."""
    from b2batch import set_setting
    from b2batch.farm.farm_pilots import FarmSteering
    from b2batch.systems.slurm import SlurmSystem

    write_list(tmp_path / "t.txt", ["true"])
    set_setting("slurm_settings", {"time": "01:00:00"})
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["t.txt", "--batch-system", "slurm", "--jobs", "3", "--signal-seconds", "300"])
    steering = FarmSteering(args, None)
    job = steering.make_pilot("pilot-0")
    command, _ = SlurmSystem(Run()).submit_command(job)
    assert "--time=01:00:00" in command and "--requeue" in command and "--signal=B:USR1@300" in command
    wrapper = job.files.wrapper.read_text()
    assert "-m b2batch.farm" in wrapper and "--pilot" in wrapper and "--no-requeue" not in wrapper
    args = parser.parse_args(["t.txt", "--batch-system", "slurm", "--no-requeue"])
    command, _ = SlurmSystem(Run()).submit_command(FarmSteering(args, None).make_pilot("pilot-0"))
    assert "--requeue" not in command


def _real_farm(tmp_path: Path, system: str) -> None:
    settings(tmp_path, poll_interval=0.5, max_poll_interval=2)
    job_variable = "SLURM_JOB_ID" if system == "slurm" else "JOB_ID"
    write_list(tmp_path / "t.txt", [f"echo ${job_variable} $(hostname)" for _ in range(10)])
    start = time.monotonic()
    done = subprocess.run(farm_command("t.txt", "--batch-system", system, "--jobs", "2", "--proc", "2"),
                          cwd=tmp_path, env=env_for(tmp_path), capture_output=True, text=True, check=False, timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    work = tmp_path / "t.txt_workdir"
    assert sorted(ids_in(work / "finished")) == list(range(10))
    job_ids = {(work / "logs" / f"log_{i}").read_text().split()[0] for i in range(10)}
    assert all(j.split("_")[0].isdigit() for j in job_ids) and 1 <= len(job_ids) <= 2, job_ids
    assert time.monotonic() - start < 200


@pytest.mark.slow
@pytest.mark.slurm
def test_farm_on_the_real_slurm(slurm: None,  # noqa: F811
                                 tmp_path: Path) -> None:
    _real_farm(tmp_path, "slurm")


@pytest.mark.slow
@pytest.mark.sge
def test_farm_on_the_real_sge(sge: None,  # noqa: F811
                               tmp_path: Path) -> None:
    _real_farm(tmp_path, "sge")


def test_python_m_b2batch_farm_in_a_pilot_uses_the_same_work_dir(tmp_path: Path) -> None:
    """A pilot's own farmer (as the wrapper runs it) shares the steering's work dir and lock."""
    write_list(tmp_path / "t.txt", ["true", "true"])
    done = subprocess.run([sys.executable, "-m", "b2batch.farm", str(tmp_path / "t.txt"), "--workdir",
                           str(tmp_path / "wd"), "--proc", "1", "--pilot", "--no-requeue"], cwd="/",
                          env=env_for(tmp_path), capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 0, done.stderr
    assert sorted(ids_in(tmp_path / "wd" / "finished")) == [0, 1]
    assert "Working on task list" not in done.stdout and os.path.exists(tmp_path / "wd" / "lock")


def test_a_pilot_that_dies_is_named_with_its_job_and_logs_and_its_line_goes_back(tmp_path: Path) -> None:
    settings(tmp_path)
    write_list(tmp_path / "t.txt", ["kill -9 $PPID"])  # the line kills its farmer, so the pilot dies
    done = subprocess.run(farm_command("t.txt", "--batch-system", "local"), cwd=tmp_path, env=env_for(tmp_path),
                          capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    pilot = tmp_path / "t.txt_workdir" / "b2batch" / "jobs" / "pilots" / "pilot-0"
    assert "b2batch farm: pilot pilot-0 failed: job " in done.stderr
    assert "on local exited with code 137 (killed by SIGKILL)" in done.stderr
    assert f"stderr: {pilot / 'logs' / 'stderr'}" in done.stderr and "Task farm" not in done.stderr
    assert ids_in(tmp_path / "t.txt_workdir" / "toprocess") == [0]  # not left claimed by the dead farmer
    assert "1 to process" in done.stdout and "running elsewhere" not in done.stdout


def test_pilots_keep_the_timeout_themselves_only_without_a_steering_process(tmp_path: Path, monkeypatch) -> None:
    from b2batch.farm.farm_pilots import FarmSteering

    monkeypatch.chdir(tmp_path)
    write_list(tmp_path / "t.txt", ["true"])
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    alone = FarmSteering(parser.parse_args(["t.txt", "--batch-system", "slurm", "--submit-only", "--timeout", "30"]), None)
    wrapper = alone.make_pilot("pilot-0").files.wrapper.read_text()
    assert "--timeout 30" in wrapper and "--steering" not in wrapper
    steered = FarmSteering(parser.parse_args(["t.txt", "--batch-system", "slurm", "--timeout", "30"]), None)
    wrapper = steered.make_pilot("pilot-0").files.wrapper.read_text()
    assert "--timeout" not in wrapper and f"--steering {steered.run.tag}" in wrapper


@pytest.mark.parametrize("walltime, requeued", [(100, True), (1000, False)])
def test_a_slurm_pilot_requeues_itself_after_the_time_limit_warning_never_after_a_cancel(
        tmp_path: Path, walltime: int, requeued: bool) -> None:
    """The job's wrapper forwards Slurm's USR1 warning as SIGTERM, and scancel sends SIGTERM too: a SIGTERM
    within --signal-seconds (+60 s) of the allocation's end is the warning (requeue), earlier it is a cancel (a
    requeue would put the cancelled job back into the queue)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text(f"#!/bin/sh\necho \"$@\" >> {tmp_path / 'scontrol.calls'}\n")
    (bin_dir / "scontrol").chmod(0o755)
    write_list(tmp_path / "t.txt", ["sleep 60", "sleep 60"])
    env = env_for(tmp_path, SLURM_JOB_ID="4242", PATH=f"{bin_dir}:{os.environ['PATH']}")
    farmer = subprocess.Popen([sys.executable, "-m", "b2batch.farm", "t.txt", "--proc", "1", "--pilot",
                               "--walltime", str(walltime), "--signal-seconds", "120"], cwd=tmp_path, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: (tmp_path / "t.txt_workdir" / "logs" / "log_0").exists(), 30, "the first line")
    farmer.send_signal(signal.SIGTERM)
    out, err = farmer.communicate(timeout=30)
    assert farmer.returncode == -signal.SIGTERM, err
    assert sorted(ids_in(tmp_path / "t.txt_workdir" / "toprocess")) == [0, 1]
    calls = (tmp_path / "scontrol.calls").read_text() if (tmp_path / "scontrol.calls").exists() else ""
    assert calls == ("requeue 4242\n" if requeued else ""), out
