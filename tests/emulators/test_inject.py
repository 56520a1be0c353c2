"""Every failure injection: failing submits, holds, lost jobs, delayed views, forced exits."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.emulators.conftest import Emu, gone, wait_for

SLEEP = "executable = /bin/sleep\narguments = 30\nlog = j.log\nqueue\n"


def proc_pid(emu: Emu, system: str, job_id: str) -> int:
    return wait_for(lambda: (emu.table(system)["jobs"][job_id].get("proc") or [0])[0])


def test_fail_submits_then_recover(emu: Emu) -> None:
    assert emu.call("inject", "htcondor", "fail-submits", "2").rc == 0
    assert emu.call("inject", "lsf", "fail-submits", "1").rc == 0
    for _ in range(2):
        failed = emu.call("condor_submit", "-", stdin="executable = /bin/true\nqueue\n")
        assert failed.rc == 1 and failed.out == "" and "Failed to connect to local queue manager" in failed.err
    assert emu.submit("executable = /bin/true\nqueue\n") == 1
    bsub = emu.call("bsub", "true")
    assert bsub.rc == 255 and "Job not submitted" in bsub.err and bsub.out == ""
    assert emu.bsub("true") == 1
    assert json.loads(emu.call("inject", "lsf", "status").out) == {}


def test_hold_running_job_kills_it_and_release_runs_it_again(emu: Emu) -> None:
    emu.submit(SLEEP)
    pid = proc_pid(emu, "htcondor", "1.0")
    assert emu.call("inject", "htcondor", "hold", "1.0", "--reason", "Memory limit exceeded").rc == 0
    ad = emu.condor_q()[0]
    assert (ad["JobStatus"], ad["HoldReason"], ad["HoldReasonCode"], ad["HoldReasonSubCode"]) == (
        5,
        "Memory limit exceeded",
        34,
        0,
    )
    wait_for(lambda: gone(pid))
    time.sleep(0.3)
    assert emu.condor_q()[0]["JobStatus"] == 5  # held jobs do not run
    assert emu.call("inject", "htcondor", "release", "1").rc == 0
    ad = wait_for(lambda: (a := emu.condor_q()[0]) and a["JobStatus"] == 2 and a)
    assert ad["NumJobStarts"] == 2 and "HoldReason" not in ad


def test_hold_next_holds_only_the_next_job(emu: Emu) -> None:
    emu.call("inject", "htcondor", "hold-next", "1")
    emu.submit("executable = /bin/true\nrequest_memory = 2048\nqueue 2\n")
    wait_for(lambda: len(emu.condor_q(history=True)) == 1)
    held = emu.condor_q()
    assert [(ad["ProcId"], ad["JobStatus"], ad["HoldReasonCode"]) for ad in held] == [(0, 5, 34)]
    assert "memory limit of 2048 megabytes" in held[0]["HoldReason"]


def test_exit_next_for_both_systems(emu: Emu) -> None:
    emu.call("inject", "htcondor", "exit-next", "--code", "3")
    emu.call("inject", "lsf", "exit-next", "--code", "7")
    emu.submit("executable = /bin/true\noutput = never.out\nqueue 2\n")
    emu.bsub("-o", "lsf.out", "true")
    ads = wait_for(lambda: (a := emu.condor_q(history=True)) and len(a) == 2 and a)
    assert sorted(ad["ExitCode"] for ad in ads) == [0, 3]
    record = wait_for(lambda: (r := emu.bjobs("-o", "stat exit_code", "1")["RECORDS"][0]) and r["STAT"] == "EXIT" and r)
    assert record["EXIT_CODE"] == "7"
    assert "Exited with exit code 7." in Path("lsf.out").read_text()


def test_lose_htcondor_job_vanishes_everywhere(emu: Emu) -> None:
    emu.submit(SLEEP)
    pid = proc_pid(emu, "htcondor", "1.0")
    assert emu.call("inject", "htcondor", "lose", "1.0").rc == 0
    # As HTCondor 25: condor_q prints nothing, condor_history an empty list (tests/emulators/test_htcondor_vs_real.py)
    assert emu.call("condor_q", "-json").out == "" and emu.call("condor_history", "-json").out == "[\n]\n"
    wait_for(lambda: gone(pid))
    assert emu.call("inject", "htcondor", "lose", "5.0").rc == 1


def test_lose_lsf_job_as_unknown_zombie_or_vanished(emu: Emu) -> None:
    jobs = [emu.bsub("sleep 30") for _ in range(3)]
    pid = proc_pid(emu, "lsf", "1")
    emu.call("inject", "lsf", "lose", "1")
    emu.call("inject", "lsf", "lose", "2", "--as", "ZOMBI")
    emu.call("inject", "lsf", "lose", "3", "--as", "vanish")
    records = emu.bjobs("-o", "jobid stat", *map(str, jobs))["RECORDS"]
    assert records == [
        {"JOBID": "1", "STAT": "UNKWN"},
        {"JOBID": "2", "STAT": "ZOMBI"},
        {"JOBID": "3", "ERROR": "Job <3> is not found"},
    ]
    wait_for(lambda: gone(pid))
    assert emu.call("bkill", "1").out == "Job <1> is being terminated\n"


def test_delay_shows_state_changes_late(emu: Emu) -> None:
    emu.call("inject", "htcondor", "delay", "3")
    emu.call("inject", "lsf", "delay", "3")
    emu.submit("executable = /bin/true\nqueue\n")
    job = emu.bsub("true")
    assert [ad["JobStatus"] for ad in emu.condor_q()] == [1]  # a new job is visible at once
    wait_for(lambda: emu.table("htcondor")["jobs"]["1.0"]["status"] == "exited")
    wait_for(lambda: emu.table("lsf")["jobs"][str(job)]["status"] == "exited")
    assert emu.condor_q() and emu.condor_q()[0]["JobStatus"] in (1, 2)  # still in the queue
    assert emu.bjobs("-o", "stat", str(job))["RECORDS"][0]["STAT"] in ("PEND", "RUN")
    ads = wait_for(lambda: emu.condor_q(history=True), timeout=10)
    assert ads[0]["JobStatus"] == 4
    wait_for(lambda: emu.bjobs("-o", "stat", str(job))["RECORDS"][0]["STAT"] == "DONE", timeout=10)
    emu.call("inject", "htcondor", "clear")
    assert json.loads(emu.call("inject", "htcondor", "status").out) == {}


def test_inject_usage_errors(emu: Emu) -> None:
    assert emu.call("inject", "lsf", "hold", "1").rc != 0
    assert emu.call("inject", "slurm", "delay", "1").rc != 0
    assert emu.call("inject", "lsf", "hold-next").rc == 2
