"""The joblib backend on the real Slurm (in this process) and on the HTCondor emulator (a workflow script under
``b2batch emulate htcondor``): values as loky's, an exception, a job removed from outside, the throttle, nested
Parallel, a 50 MB argument, generators, ``__main__`` functions and delete_task_file_on_load."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("joblib")

from joblib import Parallel, delayed, parallel_config  # noqa: E402

import b2batch.joblib  # noqa: E402, F401
from b2batch.calls import CallJobError  # noqa: E402

from conftest import clean_env, wait_for  # noqa: E402
from test_joblib_backend import big, interval, most_overlapping, outer, square, write_pid_and_sleep  # noqa: E402

SLURM = {"poll": {"poll_interval": 0.5, "max_poll_interval": 2}}


def slurm_config(tmp_path: Path, **more: object) -> dict:
    (tmp_path / "settings.json").write_text(json.dumps(SLURM["poll"]))
    return {"backend": "b2batch", "batch_system": "slurm", **more}


# --- SGE -----------------------------------------------------------------------------------------------------

@pytest.mark.sge
@pytest.mark.usefixtures("sge")
@pytest.mark.slow
def test_sge_values_generator_exception_and_resources(tmp_path: Path) -> None:
    (tmp_path / "settings.json").write_text(json.dumps(SLURM["poll"]))
    config = {"backend": "b2batch", "batch_system": "sge", "request_memory": "1Gb"}
    expected = [i * i for i in range(20)]
    with parallel_config(**config):
        assert Parallel()(delayed(square)(i) for i in range(20)) == expected
        assert sorted(Parallel(return_as="generator_unordered")(delayed(square)(i) for i in range(20))) == expected
        with pytest.raises(ValueError, match="negative: -2") as caught:
            Parallel()(delayed(square)(i) for i in (1, -2))
    assert any("sge" in note for note in caught.value.__notes__)


# --- Slurm ---------------------------------------------------------------------------------------------------

@pytest.mark.slurm
@pytest.mark.usefixtures("slurm")
@pytest.mark.slow
def test_slurm_values_generators_exception_and_a_50_mb_argument(tmp_path: Path) -> None:
    expected = [i * i for i in range(40)]
    data = os.urandom(50 * 1024 * 1024)
    with parallel_config(**slurm_config(tmp_path)):
        assert Parallel()(delayed(square)(i) for i in range(40)) == expected
        assert list(Parallel(return_as="generator")(delayed(square)(i) for i in range(40))) == expected
        [result] = Parallel()(delayed(big)(data) for _ in range(1))
        with pytest.raises(ValueError, match="negative: -2") as caught:
            Parallel()(delayed(square)(i) for i in (1, -2))
    assert result[:-1] == data[::-1]
    assert any("slurm" in note for note in caught.value.__notes__)


@pytest.mark.slurm
@pytest.mark.usefixtures("slurm")
@pytest.mark.slow
def test_slurm_job_cancelled_from_outside_is_submitted_again_then_reported(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    config = slurm_config(tmp_path, pilot_jobs=0, max_resubmissions=1)
    with parallel_config(**config), pytest.raises(CallJobError) as caught:
        stream = Parallel(return_as="generator")(delayed(write_pid_and_sleep)(str(pids), 120) for _ in range(1))
        for attempt in (1, 2):
            wait_for(lambda: list(pids.glob("*.pid")), 90, f"attempt {attempt} to start")[0].unlink()
            job = _slurm_job_of(tmp_path)
            subprocess.run(["scancel", job], check=True)
            wait_for(lambda: _slurm_job_of(tmp_path) != job or attempt == 2, 60, "the job to go")
        list(stream)
    message = str(caught.value)
    assert "on slurm" in message and "CANCELLED" in message and "stderr" in message, message


def _slurm_job_of(folder: Path) -> str:
    journals = sorted(folder.glob("task_files/joblib/*/jobs/*/submission.json"))
    return json.loads(journals[-1].read_text())["job_id"] if journals else ""


@pytest.mark.slurm
@pytest.mark.usefixtures("slurm")
@pytest.mark.slow
def test_slurm_throttle_nesting_and_delete_task_file_on_load(tmp_path: Path) -> None:
    times = tmp_path / "times"
    times.mkdir()
    with parallel_config(**slurm_config(tmp_path, throttle=2, pilot_jobs=0)):
        Parallel()(delayed(interval)(str(times), i, 2.0) for i in range(5))
    assert most_overlapping([json.loads(p.read_text()) for p in times.glob("*.json")]) == 2
    with parallel_config(**slurm_config(tmp_path, max_recursion_level=1, throttle=[2, 2])):
        outers = Parallel()(delayed(outer)(i) for i in range(2))
    assert all(r["pid"] not in {pid for pid, _ in r["inner"]} for r in outers), outers
    shared = tmp_path / "shared"
    with parallel_config(**slurm_config(tmp_path, throttle=1, pilot_jobs=0, delete_task_file_on_load=True,
                                        shared_data_dir=str(shared))):
        Parallel()(delayed(interval)(str(shared), i, 3.0) for i in range(3))
    runs = [json.loads(p.read_text()) for p in shared.glob("*.json")]
    assert most_overlapping(runs) >= 2 and all(files <= 1 for *_, files in runs), runs


@pytest.mark.slurm
@pytest.mark.usefixtures("slurm")
@pytest.mark.slow
def test_slurm_main_function(workflow, tmp_path: Path) -> None:
    wf = workflow("joblib_calls.py")
    (tmp_path / "settings.json").write_text(json.dumps(SLURM["poll"]))
    done = wf.run("values", "--system", "slurm", timeout=180)
    result = json.loads(done.stdout.split("RESULT ", 1)[1])
    assert result["list"] == result["generator"] == result["loky"], done.stderr[-3000:]


# --- the HTCondor emulator -----------------------------------------------------------------------------------

def emulated(tmp_path: Path, *args: str, timeout: float = 180, popen: bool = False, system: str = "htcondor"):
    env = clean_env(B2BATCH_EMULATOR_DIR=str(tmp_path / "emulator"), B2BATCH_EMULATOR_SLOTS="4")
    command = [sys.executable, "-m", "b2batch", "emulate", system, "--", sys.executable,
               str(tmp_path / "joblib_calls.py"), *args, "--system", system]
    if popen:
        return subprocess.Popen(command, cwd=tmp_path, env=env, text=True, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE), env
    return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def result_of(done) -> dict:
    assert "RESULT " in done.stdout, done.stderr[-4000:]
    return json.loads(done.stdout.split("RESULT ", 1)[1])


@pytest.mark.slow
def test_htcondor_emulator_values_exception_and_nesting(workflow, tmp_path: Path) -> None:
    workflow("joblib_calls.py")
    values = result_of(emulated(tmp_path, "values"))
    assert values["list"] == values["generator"] == values["loky"] and values["unordered"] == values["loky"]
    error = result_of(emulated(tmp_path, "error"))
    assert error["type"] == "ValueError" and error["message"] == "negative: -3"
    assert "in square" in error["cause"] and "htcondor" in error["notes"][0]
    nested = result_of(emulated(tmp_path, "nested", "--settings", json.dumps({"max_recursion_level": 1})))
    for call in nested["outer"]:
        assert {i["level"] for i in call["inner"]} == {"2"} and call["pid"] not in {i["pid"] for i in call["inner"]}


@pytest.mark.slow
def test_htcondor_emulator_throttle_delete_task_file_on_load_and_a_50_mb_argument(workflow, tmp_path: Path) -> None:
    workflow("joblib_calls.py")
    found = result_of(emulated(tmp_path, "throttle", "--out", str(tmp_path / "shared"), timeout=300))
    assert found["throttled"] == 2, found
    # delete_task_file_on_load: the throttle of 1 counts only queued jobs, so loaded ones overlap
    assert found["on_load"]["overlapping"] >= 2 and all(f <= 1 for f in found["on_load"]["files"]), found
    assert found["big"] is True


@pytest.mark.slow
def test_lsf_emulator_values_and_exception(workflow, tmp_path: Path) -> None:
    workflow("joblib_calls.py")
    values = result_of(emulated(tmp_path, "values", system="lsf"))
    assert values["list"] == values["generator"] == values["loky"] and values["unordered"] == values["loky"]
    error = result_of(emulated(tmp_path, "error", system="lsf"))
    assert error["type"] == "ValueError" and error["message"] == "negative: -3"
    assert "in square" in error["cause"] and "lsf" in error["notes"][0]


@pytest.mark.slow
def test_htcondor_emulator_job_removed_from_outside_is_submitted_again_then_reported(workflow, tmp_path: Path) -> None:
    workflow("joblib_calls.py")
    out = tmp_path / "pids"
    steering, env = emulated(tmp_path, "sleep", "--out", str(out), "--settings",
                             json.dumps({"pilot_jobs": 0, "max_resubmissions": 1}), popen=True)
    try:
        for attempt in (1, 2):
            wait_for(lambda: list(out.glob("*.pid")), 90, f"attempt {attempt} to start")[0].unlink()
            job = _condor_running_job(env)
            assert subprocess.run([sys.executable, "-m", "b2batch.emulators", "condor_rm", job], env=env,
                                  capture_output=True, timeout=60).returncode == 0
        stdout, stderr = steering.communicate(timeout=120)
    finally:
        steering.kill()
    result = json.loads(stdout.split("RESULT ", 1)[1])
    assert result["type"] == "CallJobError", stderr[-3000:]
    assert "JobStatus 3 (Removed)" in result["message"] and "stderr" in result["message"]
    assert "submitting task write_pid_and_sleep #0 again (1 of 1)" in stderr


@pytest.mark.slow
def test_htcondor_emulator_pool_and_schedd_reach_the_condor_commands(workflow, tmp_path: Path) -> None:
    """joblib-htcondor's ``pool`` and ``schedd`` become ``-pool`` and ``-name`` of every condor_* command: the
    emulated pool's own schedd takes the calls, another one is not found, and the error says so."""
    workflow("joblib_calls.py")
    here = socket.gethostname()
    found = result_of(emulated(tmp_path, "htcondor", "--settings",
                               json.dumps({"schedd": here, "pool": f"{here}:9618"})))
    assert found["list"] == [0, 1, 4, 9, 16]
    elsewhere = result_of(emulated(tmp_path, "htcondor", "--settings", json.dumps({"schedd": "elsewhere.example.org"})))
    assert elsewhere["type"] == "CallJobError", elsewhere
    assert "Can't find address of schedd elsewhere.example.org" in elsewhere["message"]
    assert "-name elsewhere.example.org" in elsewhere["message"]
    assert elsewhere["message"].count("Task ") == 1, "the pilot's failure names the unit once, no other task"


def _condor_running_job(env: dict) -> str:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        out = subprocess.run([sys.executable, "-m", "b2batch.emulators", "condor_q", "-json", "-attributes",
                              "ClusterId,ProcId,JobStatus"], env=env, capture_output=True, text=True).stdout
        for ad in json.loads(out) if out.strip() else []:
            if ad["JobStatus"] == 2:
                return f"{ad['ClusterId']}.{ad['ProcId']}"
        time.sleep(0.3)
    raise AssertionError("no running job")
