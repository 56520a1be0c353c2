"""Fault script for issue 30's targets: a workflow of 200 tasks where 10% first run out of memory, 5% out of time,
one node fails every job for a while, and 2 tasks always fail; with escalation, bad-node exclusion and poison
tasks on, every other task completes in one run, with at most one extra job per escalated task, no output lost
and none corrupt; a second run of the workflow submits no job for the poison tasks.

``--system slurm`` (the target's): the real Slurm, as the multi-node cluster of tests/clusters/slurm-multi.sh
(four nodes m1..m4, one slurmd each, on this machine; started and stopped by this script):

- 10% of the tasks allocate 200 MB under ``--mem=150M``: Slurm's memory enforcement kills them (OverMemoryKill);
- 5% sleep 75 s under ``--time=1``: Slurm ends them at their time limit (TIMEOUT);
- node m4's slurmd runs in a mount namespace where the run's folder is an empty tmpfs (a lost file system
  mount) for ``--bad-seconds``, then the mount comes back;
- tasks 17 and 42 raise every time (poison tasks; ``max_task_failures`` 1, so the second run holds them back).

``--system lsf``: the LSF emulator with four emulated nodes: the first 10% of submitted jobs end as LSF does for a
job over its -M (exit 137, TERM_MEMLIMIT), the next 5% as for its -W (exit 140, TERM_RUNLIMIT); node n4 fails
every job that starts there (no wrapper) for ``--bad-seconds``.

    python bench/self_healing.py [--system slurm|lsf] [--tasks 200] [--bad-seconds 60]

Prints the figures: tasks done and failed, escalations and extra jobs per escalated task, node failures and
excluded nodes, outputs present and correct, jobs submitted, wall time, and the second run's jobs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
MULTI = ROOT / "tests" / "clusters" / "slurm-multi.sh"
POISON = [17, 42]


def report_of(folder: Path) -> dict[str, Any]:
    return json.loads(sorted((folder / "logs").glob("b2batch-run-*.report.json"),
                             key=lambda p: p.stat().st_mtime)[-1].read_text())


def slurm_setup(args: argparse.Namespace, folder: Path) -> tuple[list[str], dict[str, str], Callable[[], None],
                                                                  Callable[[], None]]:
    subprocess.run(["bash", str(MULTI), "start"], check=True)
    env = dict(os.environ, SLURM_CONF="/etc/slurm-multi/slurm.conf", PYTHONUNBUFFERED="1")
    hungry = [i for i in range(args.tasks) if i % 10 == 3]
    slow = [i for i in range(args.tasks) if i % 20 == 7]
    subprocess.run(["bash", str(MULTI), "bad-node", "m4", str(folder)], check=True)
    command = [sys.executable, "healing.py", "--system", "slurm", "--n", str(args.tasks),
               "--hungry", ",".join(map(str, hungry)), "--mb", "200", "--hold", "4",
               "--slow", ",".join(map(str, slow)), "--sleep", "75",
               "--settings", json.dumps({"mem": "150M", "time": "1"})]

    def heal() -> None:
        subprocess.run(["bash", str(MULTI), "heal-node", "m4", str(folder)], check=True)

    def stop() -> None:
        subprocess.run(["bash", str(MULTI), "stop"], check=False)

    print(f"injected: {len(hungry)} tasks over their --mem, {len(slow)} over their --time, node m4 without the "
          f"run's folder for {args.bad_seconds:g} s, poison tasks {POISON}", flush=True)
    return command, env, heal, stop


def lsf_setup(args: argparse.Namespace, folder: Path) -> tuple[list[str], dict[str, str], Callable[[], None],
                                                                Callable[[], None]]:
    env = dict(os.environ, B2BATCH_EMULATOR_DIR=str(folder / "emulator"), B2BATCH_EMULATOR_SLOTS=str(args.slots),
               PYTHONUNBUFFERED="1")

    def inject(*words: str) -> None:
        subprocess.run([sys.executable, "-m", "b2batch.emulators", "inject", "lsf", *words], env=env, check=True,
                       capture_output=True)

    memory, timed = args.tasks // 10, args.tasks // 20
    inject("nodes", "n1,n2,n3,n4")
    inject("bad-node", "n4")
    inject("exit-next", str(memory), "--code", "137", "--reason",
           "TERM_MEMLIMIT: job killed after reaching LSF memory usage limit")
    inject("exit-next", str(timed), "--code", "140", "--reason",
           "TERM_RUNLIMIT: job killed after reaching LSF run time limit")
    command = [sys.executable, "-m", "b2batch", "emulate", "lsf", "--", sys.executable, "healing.py",
               "--system", "lsf", "--n", str(args.tasks), "--settings", json.dumps({"M": "1000", "W": "10"})]
    print(f"injected: {memory} memory kills, {timed} time kills, node n4 failing for {args.bad_seconds:g} s, "
          f"poison tasks {POISON}", flush=True)
    return command, env, lambda: inject("bad-node", "n4", "--clear"), lambda: None


def outputs(folder: Path) -> tuple[int, list[str]]:
    """Outputs present, and those whose content is not their task's number (corrupt)."""
    found = sorted((folder / "results").rglob("out.txt"))
    corrupt = []
    for path in found:
        number = next((part.split("=", 1)[1] for part in path.parts if part.startswith("i=")), None)
        if path.read_text() != f"{number}\n":
            corrupt.append(str(path.relative_to(folder)))
    return len(found), corrupt


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--system", choices=["slurm", "lsf"], default="slurm")
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--bad-seconds", type=float, default=60)
    parser.add_argument("--slots", type=int, default=8, help="the LSF emulator's slots per node")
    parser.add_argument("--keep", action="store_true", help="keep the run's folder")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="b2batch-self-healing-"))
    shutil.copy(ROOT / "tests" / "workflows" / "healing.py", folder / "healing.py")
    (folder / "settings.json").write_text(json.dumps({"output_wait_timeout": 5}))
    setup = slurm_setup if args.system == "slurm" else lsf_setup
    command, env, heal, stop = setup(args, folder)
    command += ["--poison", ",".join(map(str, POISON)), "--memory-factor", "2", "--time-factor", "2",
                "--max-task-failures", "1"]
    try:
        healed = threading.Timer(args.bad_seconds, heal)
        healed.start()
        started = time.monotonic()
        done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True)
        wall = time.monotonic() - started
        healed.cancel()
        report = report_of(folder)
        again = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True)
        second = report_of(folder)
    finally:
        stop()
    (folder / "run1.stderr").write_text(done.stderr)
    (folder / "run2.stderr").write_text(again.stderr)
    jobs = {j["task_id"]: j for j in report["jobs"]}
    escalations = report["policies"].get("escalations", [])
    escalated = {e["task_id"] for e in escalations}
    extra = sorted(len(jobs[t]["job_ids"]) - 1 for t in escalated)
    node_extra = sorted(len(jobs[t]["job_ids"]) - 1 - sum(1 for e in escalations if e["task_id"] == t)
                        for t in escalated)
    nodes = report["policies"].get("node_failures", [])
    work = [j for j in report["jobs"] if j["family"] == "Work"]
    done_count = sum(1 for j in work if j["state"] == "done")
    failed = [j["task_id"] for j in work if j["state"] == "failed"]
    present, corrupt = outputs(folder)
    print(f"tasks: {len(work)} Work tasks, {done_count} done, {len(failed)} failed: {sorted(failed)}")
    print(f"escalations: {len(escalations)} ({sum(e['cause'] == 'memory' for e in escalations)} memory, "
          f"{sum(e['cause'] == 'time' for e in escalations)} time) on {len(escalated)} tasks")
    print(f"extra jobs per escalated task: max {max(extra, default=0)}, total {sum(extra)} "
          f"(of which for node failures: {sum(node_extra)})")
    print("node failures: " + (", ".join(f"{n['node']} {n['failures']} ({'excluded' if n['excluded'] else 'kept'})"
                                         for n in nodes) or "none"))
    print(f"outputs: {present} present for {done_count} done tasks, {len(corrupt)} corrupt {corrupt[:3]}")
    print(f"jobs submitted: {report['totals']['jobs']}, resubmissions: {report['totals']['resubmissions']}, "
          f"exit status {done.returncode}, wall {wall:.0f} s")
    poison_ids = {j["task_id"] for j in work if j["state"] == "failed"}
    second_jobs = [j for j in second["jobs"] if j["task_id"] in poison_ids and j.get("job_ids")]
    held = second["policies"].get("poison_tasks", [])
    print(f"second run: {second['totals']['jobs']} jobs submitted, {len(second_jobs)} of them for the poison tasks; "
          f"held back: {len(held)}; exit status {again.returncode}")
    per_task = [sum(1 for e in escalations if e["task_id"] == t) for t in escalated]
    ok = (done_count == len(work) - len(POISON) and len(failed) == len(POISON) and max(per_task, default=0) <= 1
          and present == done_count and not corrupt and not second_jobs)
    print("target met: every other task completed in one run, nothing lost or corrupt, poison tasks not submitted "
          "again" if ok else "target NOT met")
    if not args.keep:
        shutil.rmtree(folder, ignore_errors=True)
    else:
        print(f"run folder: {folder}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
