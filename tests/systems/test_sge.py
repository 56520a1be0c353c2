"""The Grid Engine backend against the real single-node SGE of tests/clusters/sge.sh."""

from __future__ import annotations

import json
import re
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from conftest import wait_for
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
    blocker = subprocess.run(["qsub", "-terse", "-b", "y", "-wd", "/tmp", "-o", "/dev/null", "-e", "/dev/null",
                              "-N", "blocker", "/bin/sleep", "600"],
                             capture_output=True, text=True, check=True).stdout.strip()
    wf = workflow("scheduler_jobs.py")
    name = f"eqw{uuid.uuid4().hex[:6]}"
    steering = wf.popen("--system", "sge", "--n", "1", "--job-name", name, "--system-settings",
                        json.dumps({"hold_jid": blocker}), stderr=subprocess.PIPE)
    try:
        job_id = _wait_for(name, "hqw")
        # The job's working directory disappears while it waits: Grid Engine puts it into Eqw. (Once the steering
        # process wrote its journal, which it does when qsub returned: qstat may list the job first.)
        (job_folder,) = (wf.folder / "task_files" / "Work").iterdir()
        wait_for(lambda: (job_folder / "submission.json").exists(), what="the job's journal")
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


QSTAT_TASK_4 = """<?xml version='1.0'?>
<job_info><queue_info><job_list state="running"><JB_job_number>69</JB_job_number><JB_name>Work.b2b713012d3-1</JB_name>
<state>r</state><tasks>4</tasks></job_list></queue_info><job_info></job_info></job_info>"""


def answering(monkeypatch, qacct: tuple[int, str, str]) -> list[list[str]]:
    """command_runner.run answering qstat with task 4 of array 69 running and qacct with ``qacct`` (exit code,
    stdout, stderr); the commands asked, in order."""
    from b2batch.systems import command_runner

    asked: list[list[str]] = []

    def answer(command: list[str], check: bool = True, **kw: object) -> subprocess.CompletedProcess[str]:
        asked.append(command)
        code, out, err = (0, QSTAT_TASK_4, "") if command[0] == "qstat" else qacct
        if check and code:
            raise AssertionError(f"{command} would raise")
        return subprocess.CompletedProcess(command, code, out, err)

    monkeypatch.setattr(command_runner, "run", answer)
    return asked


def sge_system():
    from b2batch.engine import Run
    from b2batch.engine.config import RunConfig

    return Run(config=RunConfig(scheduler_call_timeout=5)).add_system("sge", SGESystem)


def test_tag_query_reads_the_accounting_for_jobs_that_left_qstat(monkeypatch) -> None:
    """qstat forgets an ended job at once: a rerun's tag query reads qacct's records too (recorded from the
    real SGE: array 69's four tasks ended well, job 1619 was killed), the later word winning; one qstat and
    one qacct for all intents."""
    from b2batch.systems.sge import ENDED_BADLY, ENDED_WELL

    asked = answering(monkeypatch, (0, (DATA / "qacct_tagged.txt").read_text(), ""))
    system = sge_system()
    found = {index: system.find_submitted({"system": "sge", "submission": "Work.b2b713012d3-1", "index": index})
             for index in (1, 4, 5)}
    assert found[1] == ("69.1", found[1][1]) and found[1][1].state == ENDED_WELL
    assert found[4][0] == "69.4" and found[4][1].state == ENDED_WELL  # qacct's word is the newer one
    assert found[5] is None
    killed = system.find_submitted({"system": "sge", "submission": "set34d8f2.b2bca0b0ca4-1-01df0b1a",
                                    "index": None})
    assert killed[0] == "1619" and (killed[1].state, killed[1].exit_code) == (ENDED_BADLY, 137)
    assert SGESystem.state_map[ENDED_WELL] == JobStatus.successful
    assert SGESystem.state_map[ENDED_BADLY] == JobStatus.aborted
    assert [command[0] for command in asked] == ["qstat", "qacct"]
    assert asked[1][-2:] == ["-j", "*.b2b*"] and "-o" in asked[1]


@pytest.mark.parametrize("stderr", ["error: job name *.b2b* not found", "error: can't open accounting file"])
def test_tag_query_keeps_what_qstat_listed_when_qacct_finds_nothing(monkeypatch, caplog, stderr: str) -> None:
    """qacct exits 1 when no record matches (no b2batch job ended yet): not an error; another failure is
    warned about, and what qstat listed is still followed."""
    answering(monkeypatch, (1, "", stderr))
    found = sge_system().find_submitted({"system": "sge", "submission": "Work.b2b713012d3-1", "index": 4})
    assert found is not None and found[0] == "69.4" and found[1].state == "r"
    assert ("Could not read Grid Engine's accounting" in caplog.text) == ("not found" not in stderr)


@pytest.mark.parametrize("exit_code, followed", [("0", True), ("1", False), (None, False)])
def test_a_journal_job_that_ended_well_and_left_qstat_is_followed(monkeypatch, tmp_path: Path, exit_code,
                                                                 followed: bool) -> None:
    """A rerun's journal names a job that ended since the front-end looked; Grid Engine no longer lists it.
    Ended well (its exit code 0 written): followed, and the next poll reports its end, not run twice. Ended
    badly or killed (no exit code): submitted again."""
    from helpers.simulated import make_job

    answering(monkeypatch, (1, "", "error: job name *.b2b* not found"))
    system = sge_system()
    job = make_job(tmp_path, "late", system="sge")
    job.files.make_folders()
    if exit_code is not None:
        job.files.exit_code.write_text(f"{exit_code}\n")
    assert system.attach(job, {"system": "sge", "job_id": "70"}) is followed
    assert (job.job_id == "70") is followed


@pytest.mark.parametrize("exit_code, adopted", [("0", True), (None, False)])
def test_an_intents_job_whose_end_is_not_accounted_yet_is_looked_for_again(monkeypatch, tmp_path: Path,
                                                                           exit_code, adopted: bool) -> None:
    """The job of an intent ended well (exit code 0 written) just before the rerun's listing, and the accounting
    flush has not written its record yet: the place is listed again ``record_lag`` after the first listing, and
    the job followed, not run twice. Without an exit code nothing is waited for."""
    from helpers.simulated import make_job

    from b2batch.systems import command_runner

    asked: list[tuple[str, float]] = []

    def answer(command: list[str], check: bool = True, **kw: object) -> subprocess.CompletedProcess[str]:
        asked.append((command[0], time.monotonic()))
        if command[0] == "qstat":
            return subprocess.CompletedProcess(command, 0, QSTAT_TASK_4, "")
        if sum(name == "qacct" for name, _ in asked) == 1:  # not flushed yet
            return subprocess.CompletedProcess(command, 1, "", "error: job name *.b2b* not found")
        return subprocess.CompletedProcess(command, 0, (DATA / "qacct_tagged.txt").read_text(), "")

    monkeypatch.setattr(command_runner, "run", answer)
    monkeypatch.setattr(SGESystem, "record_lag", 0.3)
    system = sge_system()
    job = make_job(tmp_path, "late", system="sge")
    job.files.make_folders()
    if exit_code is not None:
        job.files.exit_code.write_text(f"{exit_code}\n")
    assert system.adopt(job, {"system": "sge", "submission": "Work.b2b713012d3-1", "index": 2}) is adopted
    assert (job.job_id == "69.2") is adopted
    names = [name for name, _ in asked]
    assert names == (["qstat", "qacct"] * (2 if adopted else 1))
    if adopted:
        assert asked[2][1] - asked[0][1] >= 0.3  # listed again only after the lag
        # a second job's miss does not wait again: the place was listed after the lag already
        other = make_job(tmp_path, "other", system="sge")
        other.files.make_folders()
        other.files.exit_code.write_text("0\n")
        assert not system.adopt(other, {"system": "sge", "submission": "Work.b2b713012d3-1", "index": 9})
        assert len(asked) == 4
