"""Pilots give their allocations back: an idle pilot of a drained queue ends within seconds while the run goes
on; no pilot is left after a run that ended done, failed, by Ctrl-C or by SIGTERM; a restarted run that finds
everything complete ends the pilots of a steering process that was SIGKILLed; a pilot near its walltime is
replaced while it runs its last task, and no task is lost. On local jobs, the HTCondor emulator and the real
Slurm and SGE. ``pilot_idle_timeout`` is 120 s throughout, so that no pilot ends by timing out."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import wait_for
from helpers.emulated import Emulated
from test_pilots import runs, workers_left

#: Seconds after the run (or its last task) ended within which no pilot may be allocated any more.
GONE_WITHIN = 10.0


def settings(folder: Path, **values: object) -> None:
    base = {"output_wait_timeout": 5, "pilot_idle_timeout": 120, "heartbeat_timeout": 10}
    (folder / "settings.json").write_text(json.dumps({**base, **values}))


def slurm_pilots(folder: Path) -> list[str]:
    """Slurm jobs of this test folder still in Slurm's queue (pending or running)."""
    out = subprocess.run(["squeue", "-h", "-o", "%i|%T|%o"], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if str(folder) in line]


def sge_pilots(folder: Path) -> list[str]:
    """SGE jobs of this test folder's pilots (those whose exit code is not written) still in qstat."""
    journals = [f for f in (folder / "task_files" / "_pilots").glob("*/jobs/*/submission.json")
                if not (f.parent / "exit_code").exists()]
    ids = {str(json.loads(f.read_text()).get("job_id")).split(".")[0] for f in journals}
    out = subprocess.run(["qstat"], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines()[2:] if line.split() and line.split()[0] in ids]


def condor_pilots(emulated: Emulated) -> list[str]:
    out = emulated.tool("condor_q", "-json", "-attributes", "ClusterId,ProcId,JobStatus").stdout
    return [f"{ad['ClusterId']}.{ad['ProcId']}" for ad in (json.loads(out) if out.strip() else [])
            if ad["JobStatus"] in (1, 2, 5)]


def allocated(system: str, folder: Path, emulated: Emulated | None = None) -> list[object]:
    if system == "slurm":
        return slurm_pilots(folder)
    if system == "sge":
        return sge_pilots(folder)
    if system == "htcondor":
        return condor_pilots(emulated)  # type: ignore[arg-type]
    return workers_left(folder)


def assert_gone(system: str, folder: Path, since: float, emulated: Emulated | None = None) -> None:
    left = GONE_WITHIN - (time.monotonic() - since)
    wait_for(lambda: not allocated(system, folder, emulated), max(0.5, left),
             f"no pilot of {system} allocated {GONE_WITHIN:g} s after the run ended")


# --- local jobs ---------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_idle_pilots_of_a_drained_queue_end_while_the_run_goes_on(workflow, tmp_path: Path) -> None:
    wf = workflow("pilots.py")
    settings(tmp_path, local_slots=4)  # (with 2, the idle pilots would also keep the sum's job from starting)
    process = wf.popen("--system", "local", "--n", "4", "--pilots", "2", "--sum-alone", "20",
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: (tmp_path / "sum-started").exists(), 90, "the sum (a job of its own) to start")
        began = time.monotonic()
        wait_for(lambda: not workers_left(tmp_path), 8, "the idle pilots to end while the sum runs")
        assert process.poll() is None and time.monotonic() - began < 15  # the run still goes on
        _out, stderr = process.communicate(timeout=120)
        assert process.returncode == 0, stderr[-5000:]
    finally:
        process.kill()


@pytest.mark.slow
@pytest.mark.parametrize("end", ["done", "failed", "SIGINT", "SIGTERM"])
def test_no_pilot_is_left_after_the_run(workflow, tmp_path: Path, end: str) -> None:
    wf = workflow("pilots.py")
    settings(tmp_path, max_resubmissions=0)
    args = ["--system", "local", "--n", "6", "--pilots", "2"]
    if end == "failed":
        args += ["--segv", "2"]
    if end.startswith("SIG"):
        args += ["--slow", "-2", "--seconds", "30"]
    process = wf.popen(*args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        if end.startswith("SIG"):
            wait_for(lambda: len(runs(tmp_path)) >= 2, 90, "two leaves to run in the pilots")
            process.send_signal(getattr(signal, end))
        _out, stderr = process.communicate(timeout=120)
    finally:
        process.kill()
    ended = time.monotonic()
    expected = {"done": 0, "failed": 1, "SIGINT": 128 + signal.SIGINT, "SIGTERM": 128 + signal.SIGTERM}[end]
    assert process.returncode == expected, stderr[-5000:]
    assert_gone("local", tmp_path, ended)


#: A run of 4 leaves in 2 pilots, leaf 3 taking 6 s.
KILLED_RUN = ("--only-leaves", "--n", "4", "--pilots", "2", "--slow", "3", "--seconds", "6")


def start_then_kill_steering(wf, folder: Path, system: str) -> None:
    """The :data:`KILLED_RUN`, its steering process SIGKILLed while leaf 3 runs, which then ends: two idle
    pilots are left whose steering process is gone."""
    first = wf.popen("--system", system, *KILLED_RUN, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def leaf3_runs() -> bool:
            noted = runs(folder)
            return all((noted.get(i) or [[]])[-1][:1] == ["end"] for i in range(3)) and bool(noted.get(3))
        wait_for(leaf3_runs, 240, "leaves 0-2 to end and leaf 3 to start")
        first.send_signal(signal.SIGKILL)  # no clean-up: the pilots run on
        first.wait(timeout=60)
    finally:
        first.kill()
    wait_for(lambda: (runs(folder).get(3) or [[]])[-1][:1] == ["end"], 60, "leaf 3 to end in its orphaned pilot")


@pytest.mark.slow
def test_a_restart_that_finds_everything_complete_ends_the_pilots_of_the_killed_run(workflow,
                                                                                      tmp_path: Path) -> None:
    wf = workflow("pilots.py")
    settings(tmp_path)
    start_then_kill_steering(wf, tmp_path, "local")
    time.sleep(3)
    assert workers_left(tmp_path), "the pilots outlive their killed steering process"
    done = wf.run("--system", "local", *KILLED_RUN, timeout=120)
    ended = time.monotonic()
    assert done.returncode == 0, done.stderr[-5000:]
    assert_gone("local", tmp_path, ended)
    assert "Ended 2 pilot job(s) of an earlier run whose steering process is gone" in done.stderr
    for i, lines in runs(tmp_path).items():
        assert [line[0] for line in lines] == ["start", "end"], (i, lines)


@pytest.mark.slow
def test_a_pilot_near_its_walltime_is_replaced_while_it_runs_its_last_task(workflow, tmp_path: Path) -> None:
    wf = workflow("pilots.py")
    walltime = 30.0
    settings(tmp_path, pilot_walltime=walltime, pilot_task_seconds=2.5, local_slots=4)
    done = wf.run("--system", "local", "--n", "24", "--pilots", "1", "--slow", "-2", "--seconds", "2",
                  timeout=300)
    assert done.returncode == 0, done.stderr[-5000:]
    assert "Resubmitted" not in done.stderr and "Failed" not in done.stderr
    by_pilot: dict[str, list[tuple[float, float]]] = {}
    for i, lines in runs(tmp_path).items():
        assert [line[0] for line in lines] == ["start", "end"], (i, lines)  # each leaf once, none lost
        by_pilot.setdefault(lines[0][2], []).append((float(lines[0][3]), float(lines[1][3])))
    spans = sorted((min(s for s, _ in ran), max(e for _, e in ran)) for ran in by_pilot.values())
    assert len(spans) >= 2, spans
    for first, last in spans:  # each pilot stopped claiming when less than a task's time (and 5 s) was left
        assert last - first <= walltime - 2.5 * 1.1 - 5 + 2.5, spans
    assert spans[1][0] < spans[0][1], f"the replacement should start before the first pilot ends: {spans}"


# --- the HTCondor emulator -----------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("end", ["done", "SIGTERM"])
def test_htcondor_emulator_leaves_no_pilot(workflow, tmp_path: Path, end: str) -> None:
    emulated = Emulated("htcondor", workflow("pilots.py"), tmp_path)
    settings(tmp_path, scheduler_unreachable_timeout=8)
    args = ["--n", "6", "--pilots", "2"] + (["--slow", "-2", "--seconds", "30"] if end == "SIGTERM" else [])
    process = emulated.popen(*args)
    try:
        if end == "SIGTERM":
            wait_for(lambda: len(runs(tmp_path)) >= 2, 120, "two leaves to run in the pilots")
            process.send_signal(signal.SIGTERM)
        _out, stderr = process.communicate(timeout=180)
    finally:
        process.kill()
    ended = time.monotonic()
    assert process.returncode == (0 if end == "done" else 128 + signal.SIGTERM), stderr[-5000:]
    assert_gone("htcondor", tmp_path, ended, emulated)


# --- the real Slurm and SGE ----------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize(("system", "end"), [
    *[pytest.param("slurm", end, marks=pytest.mark.slurm) for end in ("done", "failed", "SIGINT", "SIGTERM")],
    *[pytest.param("sge", end, marks=pytest.mark.sge) for end in ("done", "SIGTERM")]])
def test_real_scheduler_leaves_no_pilot(request, workflow, tmp_path: Path, system: str, end: str) -> None:
    request.getfixturevalue(system)  # the cluster must be up
    wf = workflow("pilots.py")
    settings(tmp_path, max_resubmissions=0)
    args = ["--system", system, "--n", "6", "--pilots", "2"]
    if end == "failed":
        args += ["--segv", "2"]
    if end.startswith("SIG"):
        args += ["--slow", "-2", "--seconds", "60"]
    process = wf.popen(*args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        if end.startswith("SIG"):
            wait_for(lambda: len(runs(tmp_path)) >= 2, 180, "two leaves to run in the pilots")
            process.send_signal(getattr(signal, end))
        _out, stderr = process.communicate(timeout=300)
    finally:
        process.kill()
    ended = time.monotonic()
    expected = {"done": 0, "failed": 1, "SIGINT": 128 + signal.SIGINT, "SIGTERM": 128 + signal.SIGTERM}[end]
    assert process.returncode == expected, stderr[-5000:]
    assert_gone(system, tmp_path, ended)


@pytest.mark.slow
@pytest.mark.slurm
def test_slurm_restart_that_finds_everything_complete_ends_the_pilots(slurm, workflow,  # noqa: F811
                                                                      tmp_path: Path) -> None:
    wf = workflow("pilots.py")
    settings(tmp_path)
    start_then_kill_steering(wf, tmp_path, "slurm")
    time.sleep(3)
    assert len(slurm_pilots(tmp_path)) == 2, "the two pilots outlive their killed steering process"
    done = wf.run("--system", "slurm", *KILLED_RUN, timeout=180)
    ended = time.monotonic()
    assert done.returncode == 0, done.stderr[-5000:]
    assert_gone("slurm", tmp_path, ended)
    assert "Ended 2 pilot job(s) of an earlier run whose steering process is gone" in done.stderr


@pytest.mark.slow
@pytest.mark.slurm
def test_slurm_pilot_is_replaced_before_its_time_limit_without_losing_a_task(slurm, workflow,  # noqa: F811
                                                                             tmp_path: Path) -> None:
    wf = workflow("pilots.py")
    settings(tmp_path, slurm_settings={"time": "1"})  # one minute: Slurm ends the pilot then
    # 14 leaves of 8 s: more than one pilot can run in its minute, even with its replacement's help.
    done = wf.run("--system", "slurm", "--n", "14", "--pilots", "1", "--slow", "-2", "--seconds", "8",
                  timeout=400)
    assert done.returncode == 0, done.stderr[-5000:]
    assert "Resubmitted" not in done.stderr
    pilots = set()
    for i, lines in runs(tmp_path).items():
        assert [line[0] for line in lines] == ["start", "end"], (i, lines)  # none cut off by the time limit
        pilots.add(lines[0][2])
    assert len(pilots) >= 2
    logs = "".join(p.read_text() for p in (tmp_path / "logs" / "pilots").rglob("*") if p.is_file())
    assert "s left in the allocation, a unit needs up to 8 s: ending" in logs  # it knew Slurm's end time
