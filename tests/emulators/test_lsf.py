"""bsub / bjobs / bkill: real messages and JSON shapes, arrays, scripts, exit codes, kills."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.emulators.conftest import Emu, gone, wait_for

FIELDS = "jobid stat exit_code job_name queue exec_host submit_time start_time finish_time jobindex"


def records(emu: Emu, *args: str) -> list[dict[str, str]]:
    return emu.bjobs("-a", "-o", FIELDS, *args)["RECORDS"]


def done(emu: Emu, count: int) -> list[dict[str, str]]:
    return wait_for(
        lambda: (r := records(emu)) and len(r) >= count and all(x["STAT"] in ("DONE", "EXIT") for x in r) and r
    )


def test_bsub_messages(emu: Emu) -> None:
    default = emu.call("bsub", "true")
    assert (default.rc, default.out, default.err) == (0, "Job <1> is submitted to default queue <normal>.\n", "")
    queued = emu.call("bsub", "-q", "short", "-J", "named", "true")
    assert queued.out == "Job <2> is submitted to queue <short>.\n"
    assert re.search(r"Job <(\d+)>", queued.out).group(1) == "2"  # what every backend parses
    bad = emu.call("bsub", "-Z", "true")
    assert bad.rc != 0 and "Job not submitted" in bad.err
    empty = emu.call("bsub", stdin="")
    assert empty.rc != 0 and "No command is specified" in empty.err


def test_exit_codes_done_and_exit(emu: Emu) -> None:
    ok = emu.bsub("-o", "ok.%J.out", "echo fine")
    bad = emu.bsub("-o", "bad.out", "-e", "bad.err", "echo oops >&2; exit 3")
    recs = {r["JOBID"]: r for r in done(emu, 2)}
    assert (recs[str(ok)]["STAT"], recs[str(ok)]["EXIT_CODE"]) == ("DONE", "")
    assert (recs[str(bad)]["STAT"], recs[str(bad)]["EXIT_CODE"]) == ("EXIT", "3")
    for record in recs.values():
        assert all(isinstance(v, str) for v in record.values())
        assert record["FINISH_TIME"].endswith(" L") and record["EXEC_HOST"] and record["START_TIME"]
    report = Path(f"ok.{ok}.out").read_text()
    assert report.startswith("fine\n") and "Successfully completed." in report
    assert "Exited with exit code 3." in Path("bad.out").read_text()
    assert Path("bad.err").read_text() == "oops\n"


def test_arrays_index_env_and_limit(emu: Emu) -> None:
    job = emu.bsub("-J", "arr[1-5%2]", "-o", "arr.%J.%I.out", "echo $LSB_JOBINDEX $LSB_JOBID; sleep 0.3")
    recs = done(emu, 5)
    assert [r["JOBID"] for r in recs] == [f"{job}[{i}]" for i in range(1, 6)]
    assert [r["JOB_NAME"] for r in recs] == [f"arr[{i}]" for i in range(1, 6)]
    assert [r["JOBINDEX"] for r in recs] == [str(i) for i in range(1, 6)]
    for index in range(1, 6):
        assert Path(f"arr.{job}.{index}.out").read_text().startswith(f"{index} {job}\n")
    one = emu.bjobs("-o", "jobid stat", f"{job}[3]")["RECORDS"]
    assert one == [{"JOBID": f"{job}[3]", "STAT": "DONE"}]
    spans = [(job_["start_time"], job_["end_time"]) for job_ in emu.table("lsf")["jobs"].values()]
    overlap = max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans)
    assert overlap <= 2


def test_array_steps_and_lists(emu: Emu) -> None:
    job = emu.bsub("-J", "s[1-7:3,10]", "true")
    assert [r["JOBINDEX"] for r in records(emu, str(job))] == ["1", "4", "7", "10"]
    assert emu.call("bsub", "-J", "bad[0-3]", "true").err == "Bad job name. Job not submitted.\n"


def test_script_on_stdin_honours_bsub_lines(emu: Emu) -> None:
    script = "#!/bin/sh\n#BSUB -J scripted\n#BSUB -o script.out\n#BSUB -q long\necho name=$LSB_JOBNAME pwd=$(pwd)\n"
    assert emu.call("bsub", stdin=script).out == "Job <1> is submitted to queue <long>.\n"
    assert emu.call("bsub", "-J", "override", stdin=script).out == "Job <2> is submitted to queue <long>.\n"
    recs = done(emu, 2)
    assert [r["JOB_NAME"] for r in recs] == ["scripted", "override"]
    output = Path("script.out").read_text()  # -o appends: both jobs' output and reports
    assert f"name=scripted pwd={Path.cwd()}\n" in output and "name=override" in output


def test_cwd_env_and_slots_options(emu: Emu, monkeypatch) -> None:
    monkeypatch.setenv("B2B_FROM_SUBMIT", "yes")
    Path("elsewhere").mkdir()
    emu.bsub("-cwd", "elsewhere", "-o", "env.out", "-n", "2", "-R", "rusage[mem=100]", "-M", "100", "-W", "10", "env")
    emu.bsub("-env", "none, ONLY=1", "-o", "none.out", "env")
    done(emu, 2)
    env = dict(
        line.split("=", 1)
        for line in Path("elsewhere/env.out").read_text().split("\n\n")[0].splitlines()
        if "=" in line
    )
    assert env["B2B_FROM_SUBMIT"] == "yes" and env["LSB_DJOB_NUMPROC"] == "2" and env["LSB_JOBINDEX"] == "0"
    assert env["LS_SUBCWD"] == str(Path("elsewhere").resolve())
    none = Path("none.out").read_text()
    assert "ONLY=1" in none and "B2B_FROM_SUBMIT" not in none


def test_bjobs_plain_empty_unknown_and_filters(emu: Emu) -> None:
    nothing = emu.call("bjobs")
    assert (nothing.rc, nothing.out, nothing.err) == (255, "", "No unfinished job found\n")
    assert emu.bjobs("-o", "jobid stat") == {"COMMAND": "bjobs", "JOBS": 0, "RECORDS": []}
    unknown = emu.call("bjobs", "-o", "jobid stat", "-json", "123")
    assert json.loads(unknown.out)["RECORDS"] == [{"JOBID": "123", "ERROR": "Job <123> is not found"}]
    assert unknown.rc == 0  # an ERROR record, not a failed command
    assert emu.call("bjobs", "123").err == "Job <123> is not found\n"
    emu.bsub("-J", "keep", "sleep 30")
    emu.bsub("-J", "other", "sleep 30")
    assert [r["JOB_NAME"] for r in emu.bjobs("-o", "job_name", "-J", "keep")["RECORDS"]] == ["keep"]
    text = emu.call("bjobs", "-o", "jobid job_name", "-noheader", "-J", "keep").out
    assert text.split() == ["1", "keep"]
    plain = emu.call("bjobs").out.splitlines()
    assert plain[0].split() == ["JOBID", "USER", "STAT", "QUEUE", "FROM_HOST", "EXEC_HOST", "JOB_NAME", "SUBMIT_TIME"]
    assert emu.call("bjobs", "-o", "nosuchfield").rc == 255


def test_json_document_layout(emu: Emu) -> None:
    emu.bsub("true")
    text = emu.call("bjobs", "-a", "-o", "jobid stat", "-json").out
    assert text.startswith('{\n  "COMMAND":"bjobs",\n  "JOBS":1,\n  "RECORDS":[\n')
    assert json.loads(text)["RECORDS"][0]["JOBID"] == "1"


def test_bkill_messages_and_processes(emu: Emu) -> None:
    running = emu.bsub("sleep 30")
    finished = emu.bsub("true")
    array = emu.bsub("-J", "a[1-3]", "sleep 30")
    wait_for(lambda: any(r["STAT"] == "RUN" for r in records(emu, str(running))))
    wait_for(lambda: records(emu, str(finished))[0]["STAT"] == "DONE")
    pid = emu.table("lsf")["jobs"][str(running)]["proc"][0]
    kill = emu.call("bkill", str(running))
    assert (kill.rc, kill.out) == (0, f"Job <{running}> is being terminated\n")
    again = emu.call("bkill", str(finished))
    assert (again.rc, again.err) == (255, f"Job <{finished}>: Job has already finished\n")
    assert emu.call("bkill", "999").err == "Job <999>: No matching job found\n"
    assert emu.call("bkill", f"{array}[2]").out == f"Job <{array}[2]> is being terminated\n"
    wait_for(lambda: gone(pid))
    stats = {r["JOBID"]: r["STAT"] for r in records(emu)}
    assert stats[str(running)] == "EXIT" and stats[f"{array}[2]"] == "EXIT"
    assert emu.call("bkill", str(array)).out == f"Job <{array}> is being terminated\n"
    wait_for(lambda: all(r["STAT"] in ("DONE", "EXIT") for r in records(emu)))


def test_run_limit_kills_with_exit_code_140(emu: Emu, monkeypatch) -> None:
    monkeypatch.setenv("B2BATCH_EMULATOR_SLOTS", "1")
    blocker = emu.bsub("sleep 30")
    limited = emu.bsub("-W", "1", "-o", "limited.out", "sleep 30")
    specs_path = emu.root / "lsf" / "specs" / f"{limited}.json"
    specs = json.loads(specs_path.read_text())
    assert specs[str(limited)]["walltime"] == 60.0
    specs[str(limited)]["walltime"] = 0.5  # a 1-minute limit is too slow for a test
    specs_path.write_text(json.dumps(specs))
    emu.call("bkill", str(blocker))
    rec = wait_for(lambda: (r := records(emu, str(limited))[0]) and r["STAT"] == "EXIT" and r)
    assert rec["EXIT_CODE"] == "140"
    assert "TERM_RUNLIMIT" in Path("limited.out").read_text()
