"""condor_submit / condor_q / condor_history / condor_rm: real output shapes, real jobs."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from tests.conftest import process_alive
from tests.emulators.conftest import Emu, wait_for

SLEEP = "executable = /bin/sleep\narguments = 30\n"


def exit_codes_sub(count: int = 3, extra: str = "") -> str:
    return (
        "executable = /bin/sh\n"
        "arguments = \"-c 'echo out $(Cluster).$(Process); echo err >&2; exit $(Process)'\"\n"
        "output = out.$(Process)\nerror = err.$(Process)\nlog = jobs.log\n"
        f"JobBatchName = batch-x\n{extra}queue {count}\n"
    )


def finished(emu: Emu, count: int) -> list[dict]:
    return wait_for(lambda: (ads := emu.condor_q(history=True)) and len(ads) >= count and ads)


def test_submit_messages_plain_and_terse(emu: Emu) -> None:
    Path("job.sub").write_text("executable = /bin/true\nqueue 3\n")
    plain = emu.call("condor_submit", "job.sub")
    assert (plain.rc, plain.out, plain.err) == (0, "Submitting job(s)...\n3 job(s) submitted to cluster 1.\n", "")
    terse = emu.call("condor_submit", "-terse", "job.sub")
    assert terse.out == "2.0 - 2.2\n"
    single = emu.call("condor_submit", stdin="executable = /bin/true\nqueue\n")  # description on stdin
    assert single.out == "Submitting job(s).\n1 job(s) submitted to cluster 3.\n"


def test_missing_executable_and_bad_file_fail_like_condor(emu: Emu) -> None:
    missing = emu.call("condor_submit", "-", stdin="executable = nope.sh\nqueue\n")
    assert missing.rc == 1 and missing.out == ""
    assert f"ERROR: Executable file {os.getcwd()}/nope.sh does not exist" in missing.err
    bad = emu.call("condor_submit", "-", stdin="executable = /bin/true\nnot a command\nqueue\n")
    assert bad.rc == 1 and "Failed to parse command file (line 2)" in bad.err
    no_queue = emu.call("condor_submit", "-", stdin="executable = /bin/true\n")
    assert no_queue.rc == 1 and 'doesn\'t contain any "queue" commands' in no_queue.err
    unreadable = emu.call("condor_submit", "no-such.sub")
    assert unreadable.rc == 1 and "no-such.sub" in unreadable.err
    assert emu.table("htcondor")["jobs"] == {}
    assert emu.submit("executable = /bin/true\nqueue\n") == 1  # failed submits used no cluster id


def test_jobs_run_and_move_to_history_with_exit_codes(emu: Emu) -> None:
    cluster = emu.submit(exit_codes_sub())
    ads = finished(emu, 3)
    assert emu.call("condor_q").rc == 0
    assert emu.call("condor_q", "-json").out == ""  # empty, not []
    assert emu.call("condor_q", "-af:jr", "JobStatus").out == ""
    by_proc = {ad["ProcId"]: ad for ad in ads}
    for proc in range(3):
        ad = by_proc[proc]
        assert (ad["JobStatus"], ad["ExitCode"], ad["ExitBySignal"]) == (4, proc, False)
        assert ad["CompletionDate"] >= ad["JobCurrentStartDate"] >= ad["QDate"]
        assert Path(f"out.{proc}").read_text() == f"out {cluster}.{proc}\n"
        assert Path(f"err.{proc}").read_text() == "err\n"


def test_running_ads_are_typed_like_real_classads(emu: Emu) -> None:
    emu.submit(SLEEP + 'request_cpus = 1\nrequest_memory = 1GB\nbatch_name = typed\n+Custom = "c"\n+Num = 7\nqueue\n')
    ad = wait_for(lambda: [a for a in emu.condor_q() if a["JobStatus"] == 2])[0]
    types = {
        "ClusterId": int,
        "ProcId": int,
        "JobStatus": int,
        "Cmd": str,
        "Iwd": str,
        "RequestCpus": int,
        "RequestMemory": int,
        "EnteredCurrentStatus": int,
        "QDate": int,
        "GlobalJobId": str,
        "JobBatchName": str,
        "Owner": str,
        "Arguments": str,
        "RemoteHost": str,
        "Custom": str,
        "Num": int,
    }
    for attr, kind in types.items():
        assert isinstance(ad[attr], kind) and not isinstance(ad[attr], bool), attr
    assert (ad["Cmd"], ad["Arguments"], ad["Iwd"]) == ("/bin/sleep", "30", os.getcwd())
    assert (ad["RequestMemory"], ad["JobBatchName"], ad["Custom"], ad["Num"]) == (1024, "typed", "c", 7)
    assert ad["GlobalJobId"].split("#")[1] == "1.0"
    assert "ExitCode" not in ad and "HoldReason" not in ad


def test_query_options(emu: Emu) -> None:
    emu.submit(SLEEP + "JobBatchName = alpha\nqueue 2\n")
    emu.submit(SLEEP + "JobBatchName = beta\nqueue 1\n")
    wait_for(lambda: emu.call("condor_q", "-af", "JobStatus").out.split().count("2") == 2)
    assert emu.call("condor_q", "1", "2.0", "-af:jr", "JobStatus").out.split("\n")[:3] == ["1.0 2", "1.1 2", "2.0 1"]
    only = emu.condor_q("-constraint", 'JobBatchName == "beta"', "-attributes", "ClusterId,ProcId,JobBatchName")
    assert only == [{"ClusterId": 2, "ProcId": 0, "JobBatchName": "beta"}]
    both = emu.condor_q("-constraint", "ClusterId == 1 && ProcId == 1", "-attributes", "ProcId")
    assert both == [{"ProcId": 1}]
    assert emu.condor_q("-constraint", 'JobBatchName == "nothing"') == []
    raw = emu.call("condor_q", "2", "-af:r", "JobBatchName", "Missing").out
    assert raw == '"beta" undefined\n'
    long = emu.call("condor_q", "2.0", "-long").out
    assert 'JobBatchName = "beta"\n' in long and "ClusterId = 2\n" in long


def test_history_match_and_order(emu: Emu) -> None:
    for _ in range(3):
        emu.submit("executable = /bin/true\nqueue\n")
    finished(emu, 3)
    newest = emu.condor_q("-match", "2", "-attributes", "ClusterId", history=True)
    assert len(newest) == 2
    assert emu.condor_q("-limit", "1", "3", history=True)[0]["ClusterId"] == 3
    assert emu.call("condor_history", "1", "-af:j", "ExitCode").out == "1.0 0\n"


def test_condor_rm_kills_and_reports_like_condor(emu: Emu) -> None:
    cluster = emu.submit(SLEEP + "queue 2\n")
    emu.submit(SLEEP + "JobBatchName = gone\nqueue 1\n")
    running = wait_for(lambda: [a for a in emu.condor_q() if a["JobStatus"] == 2 and a["ClusterId"] == 1])
    pids = [job["proc"][0] for job in emu.table("htcondor")["jobs"].values() if job.get("proc")]
    assert running and pids
    one = emu.call("condor_rm", f"{cluster}.1")
    assert (one.rc, one.out) == (0, "Job 1.1 marked for removal\n")
    whole = emu.call("condor_rm", str(cluster))
    assert (whole.rc, whole.out) == (0, "All jobs in cluster 1 have been marked for removal\n")
    constraint = emu.call("condor_rm", "-constraint", 'JobBatchName == "gone"')
    assert constraint.out == 'All jobs matching constraint (JobBatchName == "gone") have been marked for removal\n'
    unknown = emu.call("condor_rm", "77")
    assert (unknown.rc, unknown.err) == (1, "Couldn't find/remove all jobs in cluster 77\n")
    assert emu.call("condor_rm", "1.0").err == "Job 1.0 not found\n"  # already left the queue
    wait_for(lambda: not any(process_alive(pid) for pid in pids))
    history = emu.condor_q(history=True)
    assert sorted(ad["JobStatus"] for ad in history) == [3, 3, 3]
    assert all(ad["RemoveReason"].startswith("via condor_rm (by user ") for ad in history)
    assert emu.condor_q() == []


def test_event_log_is_readable_by_htcondor_bindings(emu: Emu) -> None:
    htcondor2 = pytest.importorskip("htcondor2")
    emu.submit(exit_codes_sub(2))
    finished(emu, 2)
    emu.submit(SLEEP + "log = jobs.log\nqueue\n")
    wait_for(lambda: emu.condor_q() and emu.condor_q()[0]["JobStatus"] == 2)
    assert emu.call("inject", "htcondor", "hold", "2.0", "--reason", "Memory limit exceeded").rc == 0
    assert emu.call("condor_rm", "2").rc == 0
    events = [(e.type, e.cluster, e.proc, dict(e.items())) for e in htcondor2.JobEventLog("jobs.log").events(0)]
    kinds = [(int(t), c, p) for t, c, p, _ in events]
    assert kinds.count((0, 1, 0)) == 1 and kinds.count((1, 1, 1)) == 1
    returns = {p: a["ReturnValue"] for t, c, p, a in events if int(t) == 5}
    assert returns == {0: 0, 1: 1}
    held = [a for t, c, p, a in events if int(t) == 12]
    assert held and held[0]["HoldReason"] == "Memory limit exceeded" and held[0]["HoldReasonCode"] == 34
    assert [int(t) for t, c, p, _ in events if c == 2] == [0, 1, 12, 9]


def test_job_environment_getenv_and_environment(emu: Emu, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("B2B_SUBMITTER", "here")
    common = "executable = /usr/bin/env\noutput = env.$(Cluster)\n"
    emu.submit(common + "environment = \"A=1 B='x y'\"\nqueue\n")
    emu.submit(common + "getenv = true\nqueue\n")
    emu.submit(common + "getenv = B2B_*\nqueue\n")
    finished(emu, 3)
    plain, full, pattern = (
        dict(line.split("=", 1) for line in Path(f"env.{c}").read_text().splitlines()) for c in (1, 2, 3)
    )
    assert plain["A"] == "1" and plain["B"] == "x y" and "B2B_SUBMITTER" not in plain and "PATH" not in plain
    assert plain["BATCH_SYSTEM"] == "HTCondor" and plain["_CONDOR_SCRATCH_DIR"] == os.getcwd()
    assert full["B2B_SUBMITTER"] == "here" and "PATH" in full
    assert pattern["B2B_SUBMITTER"] == "here" and "PATH" not in pattern


def test_start_failures_put_the_job_on_hold(emu: Emu) -> None:
    script = Path("not-executable.sh")
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(stat.S_IRUSR | stat.S_IWUSR)
    emu.submit(f"executable = {script.resolve()}\nqueue\n")
    emu.submit("executable = /bin/true\noutput = missing-dir/out\nqueue\n")
    held = wait_for(lambda: (ads := [a for a in emu.condor_q() if a["JobStatus"] == 5]) and len(ads) == 2 and ads)
    codes = {ad["ClusterId"]: (ad["HoldReasonCode"], ad["HoldReason"]) for ad in held}
    assert codes[1][0] == 6 and "Failed to execute" in codes[1][1] and "Permission denied" in codes[1][1]
    assert codes[2][0] == 7 and "as standard output" in codes[2][1]


def test_initialdir_and_relative_paths(emu: Emu) -> None:
    Path("sub").mkdir()
    emu.submit("executable = /bin/pwd\ninitialdir = sub\noutput = pwd.out\nlog = l.log\nqueue\n")
    finished(emu, 1)
    assert Path("sub/pwd.out").read_text().strip() == str(Path("sub").resolve())
    assert Path("sub/l.log").exists()
    bad = emu.call("condor_submit", "-", stdin="executable = /bin/true\ninitialdir = nowhere\nqueue\n")
    assert bad.rc == 1 and "nowhere" in bad.err


def test_json_is_one_array_of_objects(emu: Emu) -> None:
    emu.submit("executable = /bin/true\nqueue 2\n")
    finished(emu, 2)
    text = emu.call("condor_history", "-json", "-attributes", "ClusterId,ProcId").out
    assert text.startswith("[\n{\n") and text.endswith("}\n]\n") and "\n}\n,\n{\n" in text
    assert json.loads(text) == [{"ClusterId": 1, "ProcId": 1}, {"ClusterId": 1, "ProcId": 0}] or sorted(
        ad["ProcId"] for ad in json.loads(text)
    ) == [0, 1]


def test_command_line_batch_name_append_and_macros(emu: Emu) -> None:
    Path("job.sub").write_text("executable = /bin/echo\narguments = $(word)\noutput = o.txt\nqueue\n")
    result = emu.call("condor_submit", "-batch-name", "cli", "-append", "request_cpus = 2", "word=hello", "job.sub")
    assert result.rc == 0, result
    ad = finished(emu, 1)[0]
    assert (ad["JobBatchName"], ad["RequestCpus"], ad["ExitCode"]) == ("cli", 2, 0)
    assert Path("o.txt").read_text() == "hello\n"
