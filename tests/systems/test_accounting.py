"""Resource accounting (docs/accounting.md): each batch system's accounting read in bulk, the wrappers' own
figures, and the efficiency in the report and the summary.

Parsers are checked on recorded answers of the real tools (tests/data/accounting: Slurm 22.05 with slurmdbd and
SGE 8.1.9 of tests/clusters); end to end on the real Slurm and SGE, the HTCondor and LSF emulators and local.
"""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from b2batch.display.efficiency import suggested_mb, summary_lines
from b2batch.engine import Run
from b2batch.engine.usage import Usage
from b2batch.systems import collect
from b2batch.systems.collect import AccountingCollector
from b2batch.systems.slurm import SlurmSystem
from b2batch.systems.sge import SGESystem
from b2batch.systems.accounting import (parse_bjobs_usage, parse_condor_history, parse_qacct, parse_sacct,
                                        qacct_command, sacct_command)

from conftest import clean_env

DATA = Path(__file__).resolve().parents[1] / "data" / "accounting"
CLUSTERS = Path(__file__).resolve().parents[1] / "clusters"
MIB = 2**20


# --- parsers, on recorded answers ---------------------------------------------------------------------

def test_sacct_answer_of_many_jobs_is_read_per_job() -> None:
    found = parse_sacct((DATA / "sacct-slurm-22.05.txt").read_text())
    assert set(found) == {"1057_1", "1057_2", "1058"}
    held = found["1057_1"]  # 300 MB held for 2 s, --mem=500M: MaxRSS is on its .batch step
    assert (held.wall, held.cpu, held.max_rss, held.req_mem, held.req_cpus, held.host, held.state) == (
        3.0, 0.504, 322300 * 1024, 500 * MIB, 1, "vm", "COMPLETED")
    assert (found["1058"].state, found["1058"].exit_code, found["1058"].max_rss) == ("FAILED", 3, None)
    # The same format for the ends that have a cause (sacct's State words; ReqMem of Slurm < 21.08 per CPU):
    killed = parse_sacct("7_3|OUT_OF_MEMORY|0:125|00:00:04|00:01.200||2Gc|2|node7\n"
                         "7_3.batch|OUT_OF_MEMORY|0:125|00:00:04|00:01.200|2100M||2|node7\n"
                         "8|TIMEOUT|0:0|00:01:00|00:59.000||1G|1|node8\n"
                         "9|CANCELLED by 0|0:15|1-02:03:04|01:02:03||1G|1|None assigned\n")
    assert (killed["7_3"].cause, killed["7_3"].req_mem, killed["7_3"].max_rss) == ("memory", 4096 * MIB, 2100 * MIB)
    assert (killed["8"].cause, killed["8"].wall) == ("time", 60.0)
    assert (killed["9"].state, killed["9"].cause, killed["9"].host, killed["9"].wall) == (
        "CANCELLED", "", None, 93784.0)
    assert sacct_command(["1", "2_3"])[:5] == ["sacct", "--parsable2", "--noheader", "-j", "1,2_3"]


def test_qacct_answer_is_read_and_its_kills_named() -> None:
    text = (DATA / "qacct-sge-8.1.9.txt").read_text()
    usage = parse_qacct(text)["366"]
    assert (usage.wall, usage.cpu, usage.req_mem, usage.host, usage.exit_code) == (2.0, 0.138, 1024 * MIB, "vm", 0)
    assert usage.max_rss == int(207.844 * 1024) * 1024  # SGE prints ru_maxrss (kB) through its byte units
    killed = text.replace("exit_status  0", "exit_status  137").replace("maxvmem      209.723MB", "maxvmem 1.000G")
    killed = killed.replace("taskid       undefined", "taskid       4").replace("failed       0",
                                                                                "failed       100 : assumedly after job")
    usage = parse_qacct(killed)["366.4"]
    assert (usage.cause, usage.state) == ("memory", "failed 100: assumedly after job")
    timed = text.replace("exit_status  0", "exit_status  137").replace("-l h_vmem=1G", "-l h_rt=2,h_vmem=1G")
    assert parse_qacct(timed)["366"].cause == "time"
    assert qacct_command(["5"], "*.b2babc") == ["qacct", "-j", "5"]
    assert qacct_command(["5", "6.2"], "*.b2babc") == ["qacct", "-j", "*.b2babc"]  # one call for the run's jobs


def test_condor_history_and_bjobs_answers_are_read() -> None:
    ads = [{"ClusterId": 16, "ProcId": 0, "JobStatus": 4, "ExitCode": 0, "RemoteWallClockTime": 12.0,
            "RemoteUserCpu": 3.0, "RemoteSysCpu": 1.0, "ResidentSetSize": 307200, "MemoryUsage": 300,
            "RequestMemory": 2048, "RequestCpus": 1, "LastRemoteHost": "slot1@node3.example"},
           {"ClusterId": 16, "ProcId": 1, "JobStatus": 3, "HoldReasonCode": 34, "RemoveReason": "memory limit",
            "MemoryUsage": "/Expr((ResidentSetSize + 1023) / 1024)/"}]
    found = parse_condor_history(json.dumps(ads))
    assert (found["16.0"].cpu, found["16.0"].max_rss, found["16.0"].req_mem, found["16.0"].host) == (
        4.0, 300 * MIB, 2048 * MIB, "node3.example")
    assert (found["16.1"].cause, found["16.1"].max_rss) == ("memory", None)
    assert parse_condor_history("") == {}  # nothing in the history yet: stdout is empty
    records = {"COMMAND": "bjobs", "JOBS": 2, "RECORDS": [
        {"JOBID": "12", "STAT": "EXIT", "EXIT_CODE": "137", "CPU_USED": "5.2 second(s)", "MAX_MEM": "2 Gbytes",
         "MEMLIMIT": "2 G", "EXEC_HOST": "2*hostA", "RUN_TIME": "30 second(s)", "NREQ_SLOT": "2",
         "EXIT_REASON": "TERM_MEMLIMIT: job killed after reaching LSF memory usage limit"},
        {"JOBID": "13", "ERROR": "Job <13> is not found"}]}
    found = parse_bjobs_usage(json.dumps(records))
    assert set(found) == {"12"}
    assert (found["12"].cause, found["12"].host, found["12"].req_cpus, found["12"].max_rss, found["12"].wall) == (
        "memory", "hostA", 2, 2048 * MIB, 30.0)


class _Record:
    """What a collector writes to: the run record's accounting parts."""

    def __init__(self) -> None:
        self.jobs = {"T": object()}
        self.accounting: dict[str, str] = {}
        self.accounted: dict[str, Usage] = {}

    def account(self, key: str, job_id: str, usage: Usage) -> None:
        self.accounted[job_id] = usage


def test_the_runs_last_accounting_asks_at_its_schedulers_pace(tmp_path: Path, monkeypatch) -> None:
    """The run's end asks for the jobs that ended last until the accounting has them: first after the
    scheduler's own lag (Slurm: a fraction of a second), then twice as long each time up to a second (SGE keeps
    one second: qacct reads its whole file each time)."""
    counter = tmp_path / "calls"
    # A stand-in accounting command that has the job from its fourth call on.
    script = tmp_path / "acct"
    script.write_text(f"#!/bin/sh\necho x >> {counter}\n"
                      f"[ $(wc -l < {counter}) -ge 4 ] && echo '7 done'\nexit 0\n")
    script.chmod(0o755)
    waits: list[float] = []
    monkeypatch.setattr(collect, "time", SimpleNamespace(monotonic=time.monotonic, sleep=waits.append))

    def parse(out: str) -> dict[str, Usage]:
        return {line.split()[0]: Usage(source="test") for line in out.splitlines() if line.strip()}

    for kind, expected in ((SlurmSystem, [0.25, 0.5, 1.0]), (SGESystem, [1.0, 1.0, 1.0])):
        counter.write_text("")
        waits.clear()
        record = _Record()
        system = kind(Run())
        system.accounting = collector = AccountingCollector(
            system.name, lambda ids: [str(script), *ids], parse, record, None, lambda: 10.0)
        collector.ended("7", "T")
        system.close()
        assert "7" in record.accounted and collector.commands == 4 and waits == expected, (kind, waits)


def test_the_runs_end_waits_for_its_tasks_figures_not_its_pilots(tmp_path: Path, monkeypatch) -> None:
    """Pilot and bundle jobs end with the run and their figures go into the report only: the run's end asks for
    them with its task jobs' but does not wait for them; those still pending go to the record's
    accounting_pending (the report completes them after the run); with no task job pending nothing is asked."""
    counter = tmp_path / "calls"
    script = tmp_path / "acct"  # has task job 7 from its second call on, pilot job 8 never
    script.write_text(f"#!/bin/sh\necho x >> {counter}\n[ $(wc -l < {counter}) -ge 2 ] && echo '7 done'\nexit 0\n")
    script.chmod(0o755)
    waits: list[float] = []
    monkeypatch.setattr(collect, "time", SimpleNamespace(monotonic=time.monotonic, sleep=waits.append))

    def parse(out: str) -> dict[str, Usage]:
        return {line.split()[0]: Usage(source="test") for line in out.splitlines() if line.strip()}

    for tasks in (("7", "T"),), ():
        counter.write_text("")
        waits.clear()
        record = _Record()
        record.worker_jobs = {"P": {"job_id": "8"}}
        record.accounting_pending = {}
        system = SlurmSystem(Run())
        system.accounting = collector = AccountingCollector(
            "slurm", lambda ids: [str(script), *ids], parse, record, None, lambda: 10.0, "tag1")
        for job_id, key in (*tasks, ("8", "P")):
            collector.ended(job_id, key)
        system.close()
        assert record.accounting_pending == {"slurm": {"tag": "tag1", "jobs": {"8": "P"}}}, tasks
        assert "8" not in record.accounted and not collector.pending
        if tasks:
            assert "7" in record.accounted and collector.commands == 2 and waits == [0.25], waits
        else:
            assert collector.commands == 0 and waits == [] and not counter.read_text()


def _late_report(tmp_path: Path, pending: dict) -> Path:
    from b2batch.display.jsonfile import write_json

    report = tmp_path / "b2batch-run-x.report.json"
    head = {"accounting": {}, "accounting_pending": pending, "worker_jobs": [
        {"key": "P", "job_id": "8", "kind": "pilot"}, {"key": "Q", "job_id": "9", "kind": "pilot"}]}
    write_json(report, head, "jobs", iter([{"task_id": "T", "usage": {"wall": 1.0}}]), indent=None)
    return report


def test_the_report_gets_its_pilots_figures_when_the_accounting_has_them(tmp_path: Path, monkeypatch) -> None:
    """b2batch.command.late_accounting: asks after 1 s, then twice as long each time up to 8 s; each answer goes
    into the report at once (the pilot's usage, merged with what it had; the job out of accounting_pending), what
    never came stays pending with why after the patience; a failing command gives up at once with its message.
    The report's jobs are left as they were."""
    from b2batch.command import late_accounting
    from b2batch.display.jsonfile import read_head

    counter = tmp_path / "calls"
    script = tmp_path / "acct"  # has pilot 8 from its third call on, 9 never
    script.write_text(f"#!/bin/sh\necho \"$@\" >> {counter}\n[ $(wc -l < {counter}) -ge 3 ] && echo '8 done'\n"
                      "exit 0\n")
    script.chmod(0o755)

    def parse(out: str) -> dict[str, Usage]:
        return {line.split()[0]: Usage(cpu=0.5, source="sacct") for line in out.splitlines() if line.strip()}

    monkeypatch.setitem(late_accounting.accounting.BY_SYSTEM, "slurm",
                        (lambda ids, tag: [str(script), tag, *ids], parse))
    clock = [0.0]
    pauses: list[float] = []

    def sleep(seconds: float) -> None:
        pauses.append(seconds)
        clock[0] += seconds

    report = _late_report(tmp_path, {"slurm": {"tag": "t1", "jobs": {"8": "P", "9": "Q"}}})
    jobs = report.read_text().split("\n", 1)[1]
    late_accounting.complete(report, sleep=sleep, clock=lambda: clock[0])
    head = read_head(report, "jobs")
    [p, q] = head["worker_jobs"]
    assert p["usage"] == {"cpu": 0.5, "source": "sacct"} and "usage" not in q, head
    assert head["accounting"] == {"slurm": str(script)}
    assert head["accounting_pending"] == {"slurm": {"tag": "t1", "jobs": {"9": "Q"},
                                                     "given_up": "no record of 1 job(s) after 60 s"}}
    assert pauses == [1, 2, 4, 8, 8, 8, 8, 8, 8, 8] and sum(pauses[:-1]) <= 60 < sum(pauses)
    assert counter.read_text().splitlines()[0] == "t1 8 9" and report.read_text().split("\n", 1)[1] == jobs
    # The accounting command fails: given up at once, with its message.
    script.write_text("#!/bin/sh\necho 'sacct: error: the database is down' >&2\nexit 3\n")
    report = _late_report(tmp_path, {"slurm": {"tag": "t1", "jobs": {"8": "P"}}})
    pauses.clear()
    late_accounting.complete(report, sleep=sleep, clock=lambda: clock[0])
    head = read_head(report, "jobs")
    assert pauses == [1] and "usage" not in head["worker_jobs"][0], pauses
    assert head["accounting_pending"]["slurm"]["given_up"] == (
        f"{script} failed (exit 3): sacct: error: the database is down"), head


def test_a_units_figures_are_never_negative() -> None:
    """A unit's CPU time is a difference of two readings of its runner's clock: a tiny negative one reads 0, not
    -0.0 (the report and the summary print it)."""
    from b2batch.engine.usage import figures

    said = figures(-0.0004, -0.0001, 1, "node")
    assert str(said["cpu"]) == str(said["wall"]) == "0.0" and said["max_rss"] == 1024


def test_suggested_request_and_summary_lines() -> None:
    assert suggested_mb([300 * MIB] * 19 + [900 * MIB]) == 400  # p95 of 20 = the 19th: 300 MB + 20% -> 400
    family = {"system": "slurm", "jobs": 20, "cpu_efficiency": 0.9, "memory_efficiency": 0.15,
              "peak_memory_mb": 900.0, "requested_memory_mb": 2000.0, "killed_for_memory": 2, "killed_for_time": 0,
              "failed_nodes": {"n1": 2}, "hosts": 3, "suggested_request": "--mem=400M",
              "suggested_setting": 'slurm_settings={"mem": "400M"}'}
    lines = summary_lines({"Sim": family}, {"slurm": "sacct"})
    assert lines[1] == "Efficiency (used / requested):"
    assert lines[2] == ('  Sim on slurm (20 job(s)): memory 15% (peak 900 MB of 2.0 GB); 2 killed for memory; '
                        'failed on n1 (2); ask for --mem=400M (slurm_settings={"mem": "400M"})')
    quiet = dict(family, memory_efficiency=0.8, killed_for_memory=0, failed_nodes={})
    assert summary_lines({"Sim": quiet}) == []  # nothing to say: no lines


# --- end to end -----------------------------------------------------------------------------------------

def _report(folder: Path) -> dict:
    reports = sorted(glob.glob(str(folder / "logs" / "b2batch-run-*.report.json")))
    assert reports, f"no report in {folder}/logs"
    return json.loads(Path(reports[-1]).read_text())


def _usage(report: dict, family: str) -> list[dict]:
    return [j["usage"] for j in report["jobs"] if j["family"] == family]


def _cluster_up(name: str) -> None:
    if subprocess.run(["bash", str(CLUSTERS / f"{name}.sh"), "status"], capture_output=True).returncode != 0:
        if os.environ.get("CI"):
            pytest.fail(f"the local {name} is not running: tests/run-all.sh starts it")
        pytest.skip(f"the local {name} is not running")


@pytest.mark.slow
@pytest.mark.slurm
def test_slurm_sacct_shows_what_a_job_held_and_the_run_asks_once_per_cycle(workflow) -> None:
    _cluster_up("slurm")
    wf = workflow("accounting.py")
    done = wf.run("--system", "slurm", "--n", "2", "--mb", "300", "--fail", "--system-settings",
                  '{"mem": "1000M"}', timeout=300)
    assert done.returncode == 1, done.stderr[-3000:]  # Fail failed on purpose
    report = _report(wf.folder)
    assert report["accounting"] == {"slurm": "sacct"}
    for usage in _usage(report, "Hold"):
        assert usage["source"].startswith("sacct"), usage
        assert 300 * MIB <= usage["max_rss"] <= 420 * MIB, usage  # 300 MB held, plus Python and luigi
        assert usage["req_mem"] == 1000 * MIB and usage["req_cpus"] == 1 and usage["cpu"] >= 0.5
    hold = report["efficiency"]["Hold"]
    assert 0.30 <= hold["memory_efficiency"] <= 0.42 and hold["suggested_request"] in ("--mem=400M", "--mem=500M")
    assert report["efficiency"]["Fail"]["failed_nodes"] and _usage(report, "Fail")[0]["state"] == "FAILED"
    calls = report["scheduler_calls"]
    assert 1 <= calls["sacct"] <= 3 <= calls["squeue"], calls  # 3 jobs ended: never one call per job beyond
    assert re.search(r"^  Hold on slurm \(2 job\(s\)\): memory \d+% \(peak \d+ MB of 1000 MB\); ask for --mem=",
                     done.stderr, re.M), done.stderr[-2000:]
    # A job over its --mem is killed (the local Slurm's OverMemoryKill): named as such, with a larger request.
    wf = workflow("accounting.py", folder=wf.folder / "killed")
    done = wf.run("--system", "slurm", "--n", "1", "--mb", "400", "--hold", "4", "--system-settings",
                  '{"mem": "250M"}', timeout=300)
    assert done.returncode == 1, done.stderr[-3000:]
    report = _report(wf.folder)
    [usage] = _usage(report, "Hold")
    assert usage["cause"] == "memory" and usage.get("req_mem") == 250 * MIB, usage
    hold = report["efficiency"]["Hold"]
    assert hold["killed_for_memory"] == 1 and hold["suggested_memory_mb"] >= 300, hold
    assert re.search(r"^  Hold on slurm \(1 job\(s\)\): .*1 killed for memory; ask for --mem=\d+M", done.stderr,
                     re.M), done.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.slurm
def test_slurm_pilots_figures_reach_the_report_after_the_run(workflow) -> None:
    """The pilots end with the run; slurmdbd has them a second or more later: the run returns without waiting
    for them, and the process it left behind writes sacct's figures into its report (the pilots' entries), the
    tasks keeping their own figures from the pilots' workers."""
    _cluster_up("slurm")
    wf = workflow("accounting.py")
    done = wf.run("--system", "slurm", "--n", "2", "--mb", "100", "--hold", "0.5", "--shape", "pilots",
                  "--system-settings", '{"mem": "1000M"}', timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(r"^          the accounting figures of \d+ pilot or bundle job\(s\) follow into it", done.stderr,
                     re.M), done.stderr[-2000:]
    deadline = time.monotonic() + 60
    while (report := _report(wf.folder))["accounting_pending"] and time.monotonic() < deadline:
        time.sleep(0.5)
    assert report["accounting_pending"] == {} and report["accounting"] == {"slurm": "sacct"}, report
    assert report["worker_jobs"] and all(w["kind"] == "pilot" for w in report["worker_jobs"])
    for pilot in report["worker_jobs"]:
        usage = pilot["usage"]
        assert usage["source"].startswith("sacct") and usage["req_mem"] == 1000 * MIB and usage["state"] == \
            "COMPLETED", pilot
    for usage in _usage(report, "Hold"):
        assert usage["source"] == "wrapper" and usage["max_rss"] >= 100 * MIB, usage


def test_local_jobs_and_tasks_in_pilots_have_the_wrappers_figures(workflow, tmp_path: Path) -> None:
    for shape in ("job_per_task", "pilots"):
        wf = workflow("accounting.py", folder=tmp_path / shape)
        done = wf.run("--system", "local", "--n", "1", "--mb", "200", "--hold", "0.5", "--shape", shape, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        report = _report(wf.folder)
        [usage] = _usage(report, "Hold")
        assert usage["source"] == "wrapper" and 200 * MIB <= usage["max_rss"] <= 320 * MIB, (shape, usage)
        assert usage["cpu"] >= 0.5 and usage["wall"] >= 0.5 and usage["host"], (shape, usage)
        assert report["accounting"] == {} and report["efficiency"]["Hold"]["cpu_hours"] > 0


@pytest.mark.slow
@pytest.mark.sge
def test_sge_qacct_figures_reach_the_report(workflow) -> None:
    _cluster_up("sge")
    wf = workflow("accounting.py")
    done = wf.run("--system", "sge", "--n", "2", "--mb", "300", "--system-settings",
                  '{"resources": {"h_vmem": "2G"}}', timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    report = _report(wf.folder)
    assert report["accounting"] == {"sge": "qacct"}
    for usage in _usage(report, "Hold"):
        assert usage["source"].startswith("qacct") and usage["host"], usage
        assert 300 * MIB <= usage["max_rss"] <= 420 * MIB and usage["req_mem"] == 2048 * MIB, usage
    assert report["scheduler_calls"]["qacct"] <= 3


def _emulated(system: str, wf, tmp_path: Path, broken: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The workflow under ``b2batch emulate SYSTEM``; with ``broken``, that folder comes first on the PATH that
    the emulator gives the workflow."""
    env = clean_env(B2BATCH_EMULATOR_DIR=str(tmp_path / "emulator"), B2BATCH_EMULATOR_SLOTS="4")
    inner = wf.command("--system", system, "--n", "2", "--mb", "200", "--hold", "1")
    if broken is not None:
        inner = ["sh", "-c", f'PATH="{broken}:$PATH" exec "$@"', "sh", *inner]
    return subprocess.run([sys.executable, "-m", "b2batch", "emulate", system, "--", *inner], cwd=wf.folder,
                          env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
@pytest.mark.parametrize("system", ["htcondor", "lsf"])
def test_emulated_accounting_and_its_absence(system: str, workflow, tmp_path: Path) -> None:
    tool = {"htcondor": "condor_history", "lsf": "bjobs"}[system]
    wf = workflow("accounting.py", folder=tmp_path / "works")
    done = _emulated(system, wf, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    report = _report(wf.folder)
    assert report["accounting"] == {system: tool}
    for usage in _usage(report, "Hold"):
        assert usage["source"].startswith(tool) and 200 * MIB <= usage["max_rss"] <= 320 * MIB, usage
        assert usage["cpu"] >= 0.5 and usage["wall"] >= 1, usage
    assert "accounting is unavailable" not in done.stderr
    # The accounting command fails: the run goes on with the wrappers' figures and says so once.
    broken = tmp_path / "broken"
    broken.mkdir()
    # Only the accounting form fails (condor_history also finds jobs that left the queue, bjobs answers the
    # status queries): the accounting asks for MAX_MEM or RemoteUserCpu.
    script = ("#!/bin/sh\ncase \"$*\" in *max_mem*|*RemoteUserCpu*) echo 'error: the accounting service is down' >&2; "
              f"exit 2;; esac\nexec {sys.executable} -m b2batch.emulators {tool} \"$@\"\n")
    (broken / tool).write_text(script)
    (broken / tool).chmod(0o755)
    wf = workflow("accounting.py", folder=tmp_path / "fails")
    done = _emulated(system, wf, tmp_path, broken)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr.count("accounting is unavailable") == 1, done.stderr[-3000:]
    report = _report(wf.folder)
    assert report["accounting"][system].startswith("unavailable: ") and "down" in report["accounting"][system]
    assert report["scheduler_calls"][tool] >= 1
    for usage in _usage(report, "Hold"):  # the job wrappers' own figures
        assert usage["source"] == "wrapper" and 200 * MIB <= usage["max_rss"] <= 320 * MIB, usage
        assert usage["cpu"] >= 0.5 and usage["wall"] >= 1 and usage["host"], usage


@given(st.dictionaries(st.sampled_from(["wall", "cpu", "max_rss", "host", "source", "cause", "state", "other"]),
                       st.one_of(st.none(), st.just(""), st.floats(allow_nan=False), st.integers(), st.text()),
                       min_size=1))
def test_a_units_figures_are_recorded_as_a_usage_would_record_them(data: dict) -> None:
    """RunRecord's shortcut for a unit's figures (Usage.clean) gives what Usage.of(...).as_dict() gives."""
    assert Usage.clean(data) == Usage.of(data).as_dict()
    assert list(Usage.clean(data)) == list(Usage.of(data).as_dict())
