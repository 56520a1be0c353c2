"""Fault script for issue 30's target: a workflow of 200 tasks where 10% of the jobs first run out of memory, 5%
out of time, one node fails every job for a while, and 2 tasks always fail; with escalation and bad-node
exclusion on, every other task completes in one run, with at most one extra job per escalated task.

It runs on b2batch's LSF emulator with four emulated nodes (the local Slurm has one node, so a bad node cannot
be shown there; its memory and time kills are tested for real in tests/test_healing_runs.py):

- the first 10% of submitted jobs end as LSF does for a job over its -M (exit 137, TERM_MEMLIMIT), the next 5%
  as for its -W (exit 140, TERM_RUNLIMIT) (``inject lsf exit-next``);
- node ``n4`` fails every job that starts there (no wrapper: a lost file system) for ``--bad-seconds``;
- tasks 17 and 42 raise every time (poison tasks).

    python bench/self_healing.py [--tasks 200] [--bad-seconds 30] [--slots 8]

Prints the figures: tasks done and failed, escalations and extra jobs per escalated task, node failures and
excluded nodes, jobs submitted, wall time.
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

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--bad-seconds", type=float, default=30)
    parser.add_argument("--slots", type=int, default=8)
    parser.add_argument("--keep", action="store_true", help="keep the run's folder")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="b2batch-self-healing-"))
    shutil.copy(ROOT / "tests" / "workflows" / "healing.py", folder / "healing.py")
    (folder / "settings.json").write_text(json.dumps({"output_wait_timeout": 5}))
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
    healed = threading.Timer(args.bad_seconds, inject, ("bad-node", "n4", "--clear"))
    healed.start()
    poison = [17, 42]
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "b2batch", "emulate", "lsf", "--", sys.executable, "healing.py",
                           "--system", "lsf", "--n", str(args.tasks), "--poison", ",".join(map(str, poison)),
                           "--settings", json.dumps({"M": "1000", "W": "10"}), "--memory-factor", "2",
                           "--time-factor", "2"],
                          cwd=folder, env=env, capture_output=True, text=True)
    wall = time.monotonic() - started
    healed.cancel()
    report = json.loads(sorted((folder / "logs").glob("b2batch-run-*.report.json"))[-1].read_text())
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
    print(f"tasks: {len(work)} Work tasks, {done_count} done, {len(failed)} failed "
          f"(poison tasks {poison}: {sorted(failed)})")
    print(f"escalations: {len(escalations)} ({sum(e['cause'] == 'memory' for e in escalations)} memory, "
          f"{sum(e['cause'] == 'time' for e in escalations)} time) on {len(escalated)} tasks; injected: {memory} "
          f"memory kills, {timed} time kills")
    print(f"extra jobs per escalated task: max {max(extra, default=0)}, total {sum(extra)} "
          f"(of which for node failures: {sum(node_extra)})")
    print("node failures: " + ", ".join(f"{n['node']} {n['failures']} ({'excluded' if n['excluded'] else 'kept'})"
                                        for n in nodes) or "node failures: none")
    print(f"jobs submitted: {report['totals']['jobs']}, resubmissions: {report['totals']['resubmissions']}, "
          f"exit status {done.returncode}, wall {wall:.0f} s")
    per_task = [sum(1 for e in escalations if e["task_id"] == t) for t in escalated]
    ok = done_count == len(work) - len(poison) and len(failed) == len(poison) and max(per_task, default=0) <= 1
    print("target met: every other task completed in one run" if ok else "target NOT met")
    if not args.keep:
        shutil.rmtree(folder, ignore_errors=True)
    else:
        print(f"run folder: {folder}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
