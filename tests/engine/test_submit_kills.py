"""A steering process SIGKILLed at any instant around submission loses track of no job (issue 39, must-have 5).

Before the scheduler is asked, each job's folder gets an intent (``submitting.json``) and the batch job a tag (its
name; HTCondor: the attribute B2BatchSubmission); a rerun asks the scheduler once for the tags of the intents
newer than their journals and follows the jobs it finds. tests/workflows/submit_kill.py is the steering process
(an engine run, no luigi) and :func:`submit_kill.cycle` one kill and rerun: never two jobs for one task, no task
lost. The window while the scheduler has the jobs but the steering process has no answer yet is widened: the
emulators' ``submit-delay`` injection, a shim before sbatch/qsub on the real Slurm and SGE.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import clean_env, wait_for
from helpers.clusters import need_cluster

from b2batch.emulators import make_bin_dir

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflows"))
import submit_kill  # noqa: E402

#: Kills per emulator (random instants; phases before, during and after the scheduler call).
EMULATOR_KILLS = 6


def emulator_env(system: str, folder: Path, delay: float) -> dict[str, str]:
    env = clean_env()
    bin_dir = make_bin_dir(system, folder / "bin")
    env.update(B2BATCH_EMULATOR_DIR=str(folder / "emulator"), PATH=f"{bin_dir}{os.pathsep}{env['PATH']}")
    subprocess.run([sys.executable, "-m", "b2batch.emulators", "inject", system, "submit-delay", str(delay)],
                   env=env, check=True, capture_output=True)
    return env


def slow_submits(folder: Path, command: str, delay: float) -> dict[str, str]:
    """An environment whose ``command`` (sbatch, qsub) is the real one, printing its answer ``delay`` s late."""
    bin_dir = folder / "shims"
    bin_dir.mkdir(parents=True, exist_ok=True)
    real = subprocess.run(["which", command], capture_output=True, text=True, check=True).stdout.strip()
    shim = bin_dir / command
    shim.write_text(f'#!/bin/sh\nout=$({real} "$@")\nrc=$?\nsleep {delay}\necho "$out"\nexit $rc\n')
    shim.chmod(0o755)
    env = clean_env()
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    return env


def check(results: list[dict[str, object]]) -> None:
    for result in results:
        assert result["rerun"] == 0, result["rerun_output"]
        assert (result["duplicates"], result["lost"]) == (0, 0), result
    phases = [result["phase"] for result in results]
    assert "during" in phases, phases  # the window that matters was hit
    assert any(result["adopted"] for result in results), results  # and jobs were found by their tags


@pytest.mark.slow
@pytest.mark.parametrize("system", ["lsf", "htcondor"])
def test_kills_around_submission_on_the_emulators_neither_duplicate_nor_lose_a_task(system, tmp_path: Path) -> None:
    env = emulator_env(system, tmp_path, 0.3)
    rng = random.Random(39)
    phases = ["during", "before", "after", *rng.choices(["before", "during", "during", "after"],
                                                       k=EMULATOR_KILLS - 3)]
    results = [submit_kill.cycle(tmp_path / f"kill{k}", system, env, n=3, seconds=1.0, array=k % 2 == 0,
                                 phase=phase, window=0.35, rng=rng) for k, phase in enumerate(phases)]
    check(results)


@pytest.mark.slow
@pytest.mark.parametrize("system", [pytest.param("slurm", marks=pytest.mark.slurm),
                                    pytest.param("sge", marks=pytest.mark.sge)])
def test_kills_around_submission_on_a_real_cluster_neither_duplicate_nor_lose_a_task(system, tmp_path: Path) -> None:
    need_cluster({"slurm": "Slurm", "sge": "SGE"}[system], f"{system}.sh")
    env = slow_submits(tmp_path, {"slurm": "sbatch", "sge": "qsub"}[system], 0.5)
    rng = random.Random(5)
    results = [submit_kill.cycle(tmp_path / f"kill{k}", system, env, n=2, seconds=1.0, array=array, phase=phase,
                                 window=0.45, rng=rng)
               for k, (phase, array) in enumerate([("during", True), ("during", False), ("after", True)])]
    # On a loaded machine a kill meant to land while the scheduler has the jobs can land before the scheduler
    # took them (nothing to find by tag, nothing lost): more such kills, until one is found by its tag
    for k in range(3, 6):
        if any(result["adopted"] for result in results):
            break
        results.append(submit_kill.cycle(tmp_path / f"kill{k}", system, env, n=2, seconds=1.0, array=k % 2 == 1,
                                         phase="during", window=0.45, rng=rng))
    check(results)


def test_status_shows_a_job_whose_submission_was_not_recorded_as_queued_or_running(tmp_path: Path,
                                                                                  monkeypatch) -> None:
    """Killed while the scheduler took the jobs: ``b2batch status`` finds them by their tags, not "not
    submitted"; a task whose intent names a tag the scheduler does not have is "not submitted"."""
    from b2batch.display.jobstates import ask_batch_systems, collect

    env = emulator_env("lsf", tmp_path, 2.0)
    monkeypatch.setenv("PATH", env["PATH"])
    monkeypatch.setenv("B2BATCH_EMULATOR_DIR", env["B2BATCH_EMULATOR_DIR"])
    folder = tmp_path / "flow"
    steering = subprocess.Popen([sys.executable, submit_kill.HERE, str(folder), "--system", "lsf", "--n", "2",
                                 "--seconds", "20", "--array"], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: submit_kill._state(folder, 2) == "during", 30, "the submission to begin")
        time.sleep(0.5)  # the scheduler has the jobs; the steering process waits for bsub's answer
        steering.send_signal(signal.SIGKILL)
        steering.wait()
    finally:
        steering.kill()
    assert submit_kill._state(folder, 2) == "during"
    lost = folder / "task_files" / "Work" / "task2"
    lost.mkdir()
    (lost / "job.json").write_text(json.dumps({"task_family": "Work"}))
    (lost / "submitting.json").write_text(json.dumps({"system": "lsf", "submission": "Work.b2bnothing-1",
                                                      "index": None, "intended_at": time.time()}))
    jobs = collect(folder / "task_files")
    ask_batch_systems(jobs)
    states = {job.folder.name: (job.state, job.job_id) for job in jobs}
    assert states["task0"][0] in ("queued", "running") and states["task0"][1].endswith("[1]"), states
    assert states["task1"][0] in ("queued", "running") and states["task1"][1].endswith("[2]"), states
    assert states["task2"][0] == "not submitted", states
    subprocess.run([sys.executable, "-m", "b2batch.emulators", "bkill", "0"], env=env, capture_output=True)


def accounted(folder: Path, n: int) -> bool:
    """Whether Grid Engine's accounting has the records of the ``n`` elements of the array task0's intent names
    (written on its next flush, about a second after a job leaves qstat)."""
    intent = json.loads((folder / "task_files" / "Work" / "task0" / "submitting.json").read_text())
    done = subprocess.run(["qacct", "-j", intent["submission"]], capture_output=True, text=True)
    return done.returncode == 0 and done.stdout.count("\njobname ") == n


@pytest.mark.slow
@pytest.mark.parametrize("system", ["lsf", "htcondor", pytest.param("sge", marks=pytest.mark.sge)])
def test_jobs_that_ended_well_after_the_front_ends_check_are_followed_not_run_again(system, tmp_path: Path) -> None:
    """Killed while the scheduler held back the ids of jobs that then ended well; the rerun's front-end looked
    before they ended (``--checked-before``: it hands every task to the run). The rerun finds the jobs by their
    tags among the ended ones too (HTCondor: in its history, where an ended job goes at once; Grid Engine: in
    its accounting, qacct), follows them and runs no task twice."""
    if system == "sge":
        need_cluster("SGE", "sge.sh")
        env = slow_submits(tmp_path, "qsub", 40.0)
    else:
        env = emulator_env(system, tmp_path, 10.0)
    folder = tmp_path / "flow"
    command = [sys.executable, str(submit_kill.HERE), str(folder), "--system", system, "--n", "2", "--seconds", "0",
               "--array", "--name", "late"]
    codes = [folder / "task_files" / "Work" / f"task{i}" / "exit_code" for i in range(2)]
    first = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:  # the jobs ended, and the scheduler lists them as ended (not queued or running)
        wait_for(lambda: all(code.exists() for code in codes) and not submit_kill.active_jobs(system, "late", env)
                 and (system != "sge" or accounted(folder, 2)), 60, "the jobs to end")
        first.send_signal(signal.SIGKILL)
        first.wait()
    finally:
        first.kill()
    assert submit_kill._state(folder, 2) == "during"  # no journals: the scheduler's answer was still held back
    rerun = subprocess.run([*command, "--checked-before"], env=env, capture_output=True, text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert rerun.stderr.count("found by its tag") == 2, rerun.stderr[-3000:]
    runs = [len((folder / "runs" / f"task{i}.txt").read_text().splitlines()) for i in range(2)]
    assert runs == [1, 1], runs


@pytest.mark.parametrize("name, expected", [
    ("Step(i=3)", "Step_i_3_"), ("a b;$(rm -rf x)\n", "a_b_rm_-rf_x_"), ("-J x", "J_x"), ("", "job"),
    ("ok.name-1", "ok.name-1"), ("x" * 100, "x" * 64)])
def test_job_names_and_tags_are_safe_for_every_scheduler(name: str, expected: str) -> None:
    from b2batch.systems.tagging import safe_name, submission_tag

    assert safe_name(name) == expected
    tag = submission_tag(safe_name(name) + ".b2b12345678", 7, "Step_3_abc")
    assert tag.startswith(expected + ".b2b12345678-7-") and len(tag) == len(expected) + 23


def test_an_htcondor_submission_carries_its_tag_as_an_attribute(tmp_path: Path) -> None:
    from b2batch.systems.htcondor import submit_description

    from b2batch.engine.jobconfig import NO_SETTINGS

    class Task:
        key, family, config = "k", "Work", NO_SETTINGS

    text = submit_description(Task(), "/bin/true", str(tmp_path), "b2b123", tag='Work.b2b1-2"\nqueue 9')
    assert '+B2BatchSubmission = "Work.b2b1-2_queue_9"' in text and "queue 9" not in text.replace("_queue_9", "")


def test_htcondor_finds_a_tagged_job_that_left_the_queue_for_its_history(monkeypatch) -> None:
    """An HTCondor job that ended leaves condor_q at once: the tag query reads condor_history too (one query each
    for all intents), where a job that ended well since the front-end's check is, so that it is followed."""
    import b2batch.systems.command_runner as command_runner
    from b2batch.engine import Run
    from b2batch.engine.config import RunConfig
    from b2batch.systems.htcondor import HTCondorSystem

    def ad(proc: int, status: int) -> dict[str, object]:
        return {"ClusterId": 7, "ProcId": proc, "JobStatus": status, "B2BatchSubmission": "Work.b2b1-1"}

    answers = {"condor_q": json.dumps([ad(1, 2)]), "condor_history": json.dumps([ad(0, 4), ad(2, 3)])}
    asked: list[str] = []

    def answer(command: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
        asked.append(command[0])
        return subprocess.CompletedProcess(command, 0, answers[command[0]], "")

    monkeypatch.setattr(command_runner, "run", answer)
    system = Run(config=RunConfig(scheduler_call_timeout=5)).add_system("htcondor", HTCondorSystem)
    intents = [{"system": "htcondor", "submission": "Work.b2b1-1", "index": i, "htcondor_place": []}
               for i in (1, 2, 3)]
    found = {intent["index"]: system.find_submitted(intent) for intent in intents}
    assert {index: (job_id, native.state) for index, (job_id, native) in found.items()} == {
        1: ("7.0", "4"), 2: ("7.1", "2"), 3: ("7.2", "3")}
    assert asked == ["condor_q", "condor_history"]  # once for all three


@pytest.mark.slow
def test_a_pilot_whose_submission_was_not_recorded_is_followed_by_the_rerun_not_submitted_again(workflow,
                                                                                             tmp_path: Path) -> None:
    """Killed while the emulator holds back the pilot's id: the rerun finds the pilot by its tag (in its work
    queue's jobs/<key>/ folder), follows it, and submits no second pilot. The units the killed process had put
    into the queue have their journals from before they went in: the rerun follows them, so no leaf runs twice."""
    wf = workflow("pilots.py")
    (tmp_path / "settings.json").write_text(json.dumps({"output_wait_timeout": 5, "pilot_idle_timeout": 3,
                                                        "heartbeat_timeout": 10, "job_shape": "pilots"}))
    env = emulator_env("lsf", tmp_path, 1.5)
    command = wf.command("--system", "lsf", "--only-leaves", "--n", "2", "--pilots", "1", "--slow", "-2",
                         "--seconds", "2")
    first = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    queues = tmp_path / "task_files"
    try:
        wait_for(lambda: list(queues.glob("_pilots/*/jobs/*/submitting.json")), 60, "the pilot's intent")
        time.sleep(0.5)  # bsub took the pilot and holds back its answer
        first.send_signal(signal.SIGKILL)
        first.wait()
    finally:
        first.kill()
    assert not list(queues.glob("_pilots/*/jobs/*/submission.json"))
    rerun = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
    assert rerun.returncode == 0, rerun.stderr[-4000:]
    assert "found by its tag" in rerun.stderr, rerun.stderr[-4000:]
    bjobs = subprocess.run([sys.executable, "-m", "b2batch.emulators", "bjobs", "-a", "-json", "-o", "jobid job_name"],
                           env=env, capture_output=True, text=True, check=True).stdout
    assert len(json.loads(bjobs)["RECORDS"]) == 1, bjobs  # the one pilot, no second one
    runs = tmp_path / "runs"  # the workflow notes each leaf's starts there
    starts = {log.name: log.read_text().count("start ") for log in runs.glob("*.log")}
    assert starts == {"0.log": 1, "1.log": 1}, starts  # each leaf ran once
