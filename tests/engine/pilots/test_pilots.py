"""Many tasks per job, end to end: pilot jobs and bundles of luigi tasks on local jobs, the HTCondor and LSF
emulators, and the real Slurm and SGE; with pilots killed, signalled and a steering process killed mid-run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from conftest import wait_for
from helpers.emulated import Emulated


def runs(folder: Path) -> dict[int, list[list[str]]]:
    """Every leaf's runs as noted by the workflow: i -> [[what, pid, ppid, time], ...]."""
    found = {}
    for log in (folder / "runs").glob("*.log"):
        found[int(log.stem)] = [line.split() for line in log.read_text().splitlines()]
    return found


def assert_results(folder: Path, n: int, done) -> None:
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    sums = sorted((folder / "results").rglob("sum.txt"))
    assert len(sums) == 1 and sums[0].read_text() == f"{n * (n - 1) // 2}\n"
    noted = runs(folder)
    assert sorted(noted) == list(range(n))
    for i, lines in noted.items():
        assert [line[0] for line in lines] == ["start", "end"], (i, lines)


def workers_left(folder: Path) -> list[psutil.Process]:
    """Pilot or bundle processes of this test folder still alive."""
    left = []
    for process in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        if str(folder) in cmdline and ("/_pilots/" in cmdline or "/_bundles/" in cmdline):
            left.append(process)
    return left


def settings(folder: Path, **values: object) -> None:
    base = {"output_wait_timeout": 5, "pilot_idle_timeout": 5, "heartbeat_timeout": 10}
    (folder / "settings.json").write_text(json.dumps({**base, **values}))


# --- local jobs ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", [("--pilots", "2"), ("--per-job", "4")], ids=["pilots", "bundles"])
def test_results_are_right_and_each_task_runs_once(workflow, tmp_path: Path, mode) -> None:
    wf = workflow("pilots.py")
    settings(tmp_path)
    done = wf.run("--system", "local", "--n", "12", *mode)
    assert_results(tmp_path, 12, done)
    kind = "pilots" if mode[0] == "--pilots" else "bundles"
    assert f"Leaf         local-{kind}    12" in done.stderr
    # Several tasks shared a job: far fewer worker processes than tasks ran them.
    parents = {line[2] for lines in runs(tmp_path).values() for line in lines}
    assert len(parents) <= (2 + 2 if kind == "pilots" else 4), parents
    # Each task that succeeded handed its result to its worker, whose log line carried it: no result.json
    assert not list(tmp_path.rglob("result.json")) and len(list(tmp_path.rglob("exit_code"))) >= 13
    # Workers on this host look at their empty queue often: a closing run does not wait a second for them
    specs = [json.loads(p.read_text()) for p in tmp_path.glob(f"task_files/_{kind}/*/jobs/*/job.json")]
    assert specs and all(spec["worker"]["idle_pause"] == 0.05 for spec in specs), specs
    wait_for(lambda: not workers_left(tmp_path), 20, "the workers to end")
    report = json.loads(next((tmp_path / "logs").glob("*.report.json")).read_text())
    carriers = {job["carrier"].split(" (")[0] for job in report["jobs"]}
    assert all(c.startswith(kind[:-1] + " job ") for c in carriers), carriers
    trace = json.loads(next((tmp_path / "logs").glob("*.trace.json")).read_text())
    tracks = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert tracks == carriers  # one track per worker job, its tasks as slices
    assert sum(1 for e in trace["traceEvents"] if e.get("cat") == "task") == 13


def test_a_segfaulting_task_fails_alone(workflow, tmp_path: Path) -> None:
    wf = workflow("pilots.py")
    settings(tmp_path)
    done = wf.run("--system", "local", "--n", "6", "--per-job", "6", "--segv", "2")
    assert done.returncode == 1
    assert "exited with code 139 (killed by SIGSEGV)" in done.stderr
    assert "Leaf(i=2, slow=-1, seconds=0.0, segv=2): in bundle job" in done.stderr
    assert str(tmp_path / "logs" / "i=2") in done.stderr  # the task's own logs
    noted = runs(tmp_path)
    assert [line[0] for line in noted[2]] == ["start"]
    for i in (0, 1, 3, 4, 5):  # the others ran in the same job, after it too
        assert [line[0] for line in noted[i]] == ["start", "end"]
    assert len(sorted(tmp_path.rglob("leaf.txt"))) == 5


def start_slow(wf, tmp_path: Path, *extra: str) -> subprocess.Popen[str]:
    """A run of 4 leaves, leaf 0 sleeping 20 s, in pilots; returns once leaf 0 started."""
    process = wf.popen("--system", "local", "--n", "4", "--pilots", "2", "--slow", "0", "--seconds", "20", *extra,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # The line, not only the file: the task creates the file, then writes its "start" line.
    wait_for(lambda: runs(tmp_path).get(0), 60, "leaf 0 to start")
    return process


@pytest.mark.slow
def test_a_pilot_killed_mid_task_has_its_task_run_again_exactly_once(workflow, tmp_path: Path) -> None:
    wf = workflow("pilots.py")
    settings(tmp_path)
    process = start_slow(wf, tmp_path)
    first = runs(tmp_path)[0][0]
    os.kill(int(first[2]), signal.SIGKILL)  # the pilot (the task's parent); the task dies with it
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr[-5000:]
    lines = runs(tmp_path)[0]
    assert [line[0] for line in lines] == ["start", "start", "end"], lines
    assert lines[1][2] != first[2]  # elsewhere: another pilot
    assert not psutil.pid_exists(int(first[1])) or psutil.Process(int(first[1])).status() == psutil.STATUS_ZOMBIE
    assert "Resubmitted (1)" in stderr and "ended while running it" in stderr


@pytest.mark.slow
def test_sigusr1_puts_the_running_task_back(workflow, tmp_path: Path) -> None:
    wf = workflow("pilots.py")
    settings(tmp_path)
    process = start_slow(wf, tmp_path)
    first = runs(tmp_path)[0][0]
    os.kill(int(first[2]), signal.SIGUSR1)  # as Slurm's --signal=USR1 before the time limit
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr[-5000:]
    lines = runs(tmp_path)[0]
    assert [line[0] for line in lines] == ["start", "start", "end"], lines
    assert "Failed" not in stderr and "Resubmitted" not in stderr  # put back, not counted as a failure


def sigkill_steering(wf, folder: Path, args: list[str], started: int) -> None:
    """Start ``pilots.py`` with 2 local pilots (its last 2 leaves slow) and SIGKILL its steering process once
    ``started`` leaves have started: no clean-up, the pilots run on."""
    first = wf.popen("--system", "local", "--pilots", "2", "--slow", "-2", *args, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)
    wait_for(lambda: len(runs(folder)) >= started, 60, f"{started} leaf/leaves to start")
    first.kill()
    first.wait()


@pytest.mark.slow
def test_steering_killed_and_restarted_while_pilots_run(workflow, tmp_path: Path) -> None:
    wf = workflow("pilots.py")
    settings(tmp_path, pilot_idle_timeout=3)
    sigkill_steering(wf, tmp_path, ["--n", "8", "--seconds", "1.5"], started=3)
    assert workers_left(tmp_path), "the pilots should outlive the steering process"
    done = wf.run("--system", "local", "--n", "8", "--pilots", "2", "--slow", "-2", "--seconds", "1.5", timeout=180)
    assert done.returncode == 0, done.stderr[-5000:]
    for i, lines in runs(tmp_path).items():  # no task ran twice
        assert [line[0] for line in lines] == ["start", "end"], (i, lines)
    assert len(runs(tmp_path)) == 8
    wait_for(lambda: not workers_left(tmp_path), 30, "no pilot to be left behind")


@pytest.mark.slow
def test_pilots_of_a_sigkilled_steering_process_end_after_their_idle_timeout(workflow, tmp_path: Path) -> None:
    """No restart comes: the pilots run what was queued, then end once pilot_idle_timeout passed idle."""
    wf = workflow("pilots.py")
    settings(tmp_path, pilot_idle_timeout=4)
    sigkill_steering(wf, tmp_path, ["--n", "4", "--seconds", "1"], started=1)
    killed = time.monotonic()
    assert workers_left(tmp_path), "the pilots should outlive the steering process for a while"
    wait_for(lambda: not workers_left(tmp_path), 60, "the pilots to end by their idle timeout")
    gone = time.monotonic() - killed
    assert gone >= 4, f"the pilots ended {gone:.1f} s after the kill, before their idle timeout of 4 s"


def test_pilots_of_a_bad_executable_fail_the_tasks_with_one_clear_error(workflow, tmp_path: Path) -> None:
    wf = workflow("pilots.py")
    settings(tmp_path, executable=["/no/such/python"], max_resubmissions=1)
    done = wf.run("--system", "local", "--n", "3", "--pilots", "2")
    assert done.returncode == 1
    assert "exited with code 127" in done.stderr and "check the setting 'executable'" in done.stderr
    assert "/no/such/python" in done.stderr
    assert not runs(tmp_path)


# --- the HTCondor and LSF emulators ---------------------------------------------------------------------------

@pytest.mark.parametrize("system", ["htcondor", "lsf"])
@pytest.mark.parametrize("mode", [("--pilots", "2"), ("--per-job", "3")], ids=["pilots", "bundles"])
def test_emulators(workflow, tmp_path: Path, system: str, mode) -> None:
    emulated = Emulated(system, workflow("pilots.py"), tmp_path)
    settings(tmp_path, scheduler_unreachable_timeout=8)
    done = subprocess.run([*emulated.command("--n", "7", *mode)], cwd=tmp_path, env=emulated.env,
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert_results(tmp_path, 7, done)
    kind = "pilots" if mode[0] == "--pilots" else "bundles"
    assert f"{system}-{kind}" in done.stderr


# --- the real Slurm and SGE ----------------------------------------------------------------------------------

@pytest.mark.parametrize("system", [pytest.param("slurm", marks=pytest.mark.slurm),
                                    pytest.param("sge", marks=pytest.mark.sge)])
@pytest.mark.parametrize("mode", [("--pilots", "2"), ("--per-job", "4")], ids=["pilots", "bundles"])
def test_real_schedulers(request, workflow, tmp_path: Path, system: str, mode) -> None:
    request.getfixturevalue(system)  # the cluster must be up
    wf = workflow("pilots.py")
    settings(tmp_path)
    done = wf.run("--system", system, "--n", "10", *mode, timeout=300)
    assert_results(tmp_path, 10, done)


@pytest.mark.slurm
@pytest.mark.slow
def test_slurm_pilot_cancelled_mid_task_has_its_task_run_again_exactly_once(slurm, workflow,  # noqa: F811
                                                                             tmp_path: Path) -> None:
    wf = workflow("pilots.py")
    settings(tmp_path)
    process = wf.popen("--system", "slurm", "--n", "4", "--pilots", "2", "--slow", "0", "--seconds", "20",
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for(lambda: runs(tmp_path).get(0), 120, "leaf 0 to start")  # its "start" line written
    pilot = int(runs(tmp_path)[0][0][2])  # the process that runs leaf 0: its pilot's heartbeat names the job
    beats = [json.loads(p.read_text()) for p in (tmp_path / "task_files" / "_pilots").glob("*/workers/*.json")]
    job_id = next(beat["job_id"] for beat in beats if beat["pid"] == pilot)
    subprocess.run(["scancel", "--signal=KILL", str(job_id)], check=True)
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stderr[-5000:]
    assert [line[0] for line in runs(tmp_path)[0]] == ["start", "start", "end"]
