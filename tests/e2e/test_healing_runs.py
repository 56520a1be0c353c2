"""Memory and time escalation and bad nodes end to end (docs/policies.md): the emulators' injected memory kills
(LSF TERM_MEMLIMIT, HTCondor hold code 34) and a bad node, and the real Slurm killing a job over its --mem and
at its --time."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import clean_env
from helpers.emulated import Emulated


def report(folder: Path) -> dict[str, Any]:
    found = sorted((folder / "logs").glob("b2batch-run-*.report.json"))
    assert found, "no report written"
    return json.loads(found[-1].read_text())


def records(emulated: Emulated) -> list[dict[str, Any]]:
    if emulated.system == "lsf":
        out = emulated.tool("bjobs", "-a", "-json", "-o", "jobid stat exec_host exit_reason memlimit combined_resreq")
        return json.loads(out.stdout)["RECORDS"]
    out = emulated.tool("condor_history", "-json", "-attributes", "ClusterId,ProcId,RequestMemory,JobStatus")
    return json.loads(out.stdout)


@pytest.mark.parametrize("system", ["lsf", "htcondor"])
def test_a_job_killed_for_memory_goes_again_asking_for_twice_as_much(workflow, tmp_path: Path, system: str) -> None:
    emulated = Emulated(system, workflow("healing.py"), tmp_path)
    if system == "lsf":
        emulated.inject("exit-next", "1", "--code", "137", "--reason",
                        "TERM_MEMLIMIT: job killed after reaching LSF memory usage limit")
        settings = {"M": "1000"}
    else:
        emulated.inject("hold-next", "1", "--code", "34")  # HTCondor's "over its memory request" hold
        settings = {"request_memory": 1000}
    done = emulated.run("--n", "1", "--settings", json.dumps(settings), "--memory-factor", "2")
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(emulated.outputs()) == 1
    escalations = report(emulated.wf.folder)["policies"]["escalations"]
    assert [(e["cause"], e["from"], e["to"], e["unit"]) for e in escalations] == [("memory", 1000, 2000, "MB")]
    assert f"Work(i=0, mb=0, hold=0.0, sleep=0.0) on {system}: memory 1000 MB -> 2000 MB (out of memory, job" \
        in done.stderr, done.stderr[-3000:]
    if system == "lsf":  # the second job asked for twice the memory, in LSF's syntax
        assert [r["MEMLIMIT"] for r in records(emulated)] == ["1000 M", "2000 M"]  # bsub -M 1000, -M 2000MB
    else:
        assert sorted(ad["RequestMemory"] for ad in records(emulated)) == [1000, 2000]  # held (removed), then 2x


def test_a_bad_node_is_excluded_and_its_tasks_complete_elsewhere(workflow, tmp_path: Path) -> None:
    emulated = Emulated("lsf", workflow("healing.py"), tmp_path)
    emulated.inject("nodes", "nodeA,nodeB")
    emulated.inject("bad-node", "nodeA")
    done = emulated.run("--n", "8", "--max-node-failures", "2")
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(emulated.outputs()) == 8  # no task failed for the node's fault
    jobs = records(emulated)
    done_on = {r["EXEC_HOST"] for r in jobs if r["STAT"] == "DONE"}
    assert done_on == {"nodeB"}
    later = [r for r in jobs if "hname!=nodeA" in r["COMBINED_RESREQ"]]
    assert later and all(r["EXEC_HOST"] == "nodeB" for r in later)  # the exclusion, honoured
    nodes = report(emulated.wf.folder)["policies"]["node_failures"]
    assert [(n["node"], n["excluded"]) for n in nodes] == [("nodeA", True)] and nodes[0]["failures"] >= 2
    assert "nodeA (lsf): " in done.stderr and "excluded from later jobs" in done.stderr


# --- the real Slurm ---------------------------------------------------------------------------------------

def _slurm_up() -> None:
    script = Path(__file__).resolve().parents[1] / "clusters" / "slurm.sh"
    if subprocess.run(["bash", str(script), "status"], capture_output=True).returncode != 0:
        pytest.skip("the local Slurm is not running (bash tests/clusters/slurm.sh start)")


def _requests(job_ids: list[str]) -> list[str]:
    """Each job's memory and time request as Slurm kept them (squeue keeps ended jobs for MinJobAge)."""
    out = subprocess.run(["squeue", "--noheader", "--states=all", "--format=%i|%m|%l|%T", "--user=root"],
                         capture_output=True, text=True, check=True).stdout
    found = {line.split("|")[0]: line for line in out.split()}
    return [found.get(job_id, f"{job_id}|?") for job_id in job_ids]


@pytest.mark.slow
@pytest.mark.slurm
def test_slurm_kills_a_job_over_its_mem_and_it_completes_with_doubled_mem(workflow) -> None:
    _slurm_up()
    wf = workflow("healing.py")
    done = subprocess.run([sys.executable, str(wf.script), "--system", "slurm", "--n", "1", "--hungry", "0",
                           "--mb", "200", "--settings", json.dumps({"mem": "150M"}), "--memory-factor", "2"],
                          cwd=wf.folder, env=clean_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    entry = report(wf.folder)["policies"]["escalations"][0]
    assert (entry["cause"], entry["from"], entry["to"]) == ("memory", 150, 300), entry
    job = [j for j in report(wf.folder)["jobs"] if j["task_id"] == entry["task_id"]][0]
    first, second = _requests(job["job_ids"])
    assert first.split("|")[1:] == ["150M", first.split("|")[2], "FAILED"] and second.split("|")[1] == "300M", (
        first, second)
    assert "memory 150 MB -> 300 MB (out of memory" in done.stderr


@pytest.mark.slow
@pytest.mark.slurm
def test_slurm_time_limit_is_escalated(workflow) -> None:
    _slurm_up()
    wf = workflow("healing.py")
    done = subprocess.run([sys.executable, str(wf.script), "--system", "slurm", "--n", "1", "--slow", "0",
                           "--sleep", "75", "--settings", json.dumps({"time": "1"}), "--time-factor", "2"],
                          cwd=wf.folder, env=clean_env(), capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    entry = report(wf.folder)["policies"]["escalations"][0]
    assert (entry["cause"], entry["from"], entry["to"]) == ("time", 60, 120), entry
    assert "time 0:01:00 -> 0:02:00 (time limit" in done.stderr
