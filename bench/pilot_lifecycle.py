#!/usr/bin/env python3
"""How long pilot jobs stay allocated after their run ended (issue 28: the target is 0 pilots 10 s later).

Each scenario runs tests/workflows/pilots.py (N leaves and their sum, ``pilot_jobs`` 2, ``pilot_idle_timeout``
120 s so that no pilot ends by timing out) in a fresh folder on ``--system`` (slurm, local, or sge) and prints,
for the moment the run ended (its steering process exited), how many of its pilots were still allocated and
how many seconds passed until none was (pending or running in Slurm's/SGE's queue; for local, processes):

    done        the run finished successfully
    failed      one leaf crashes (segfault): the run fails
    SIGINT      Ctrl-C while the leaves run (30 s each)
    SIGTERM     SIGTERM while the leaves run
    restart     the steering process is SIGKILLed while a leaf runs; once that leaf ended in its orphaned
                pilot, the same command runs again, finds everything complete and ends: measured from its end

    python3 bench/pilot_lifecycle.py [--system slurm] [--scenarios done failed SIGINT SIGTERM restart] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
WORKFLOW = HERE.parent / "tests" / "workflows" / "pilots.py"
SCENARIOS = ("done", "failed", "SIGINT", "SIGTERM", "restart")


def allocated(system: str, folder: Path) -> int:
    """Pilot jobs of ``folder`` still allocated (queued or running)."""
    if system == "slurm":
        out = subprocess.run(["squeue", "-h", "-o", "%i|%o"], capture_output=True, text=True, check=False).stdout
        return sum(1 for line in out.splitlines() if str(folder) in line)
    if system == "sge":
        jobs = [f for f in (folder / "task_files" / "_pilots").glob("*/jobs/*/submission.json")
                if not (f.parent / "exit_code").exists()]
        ids = {str(json.loads(f.read_text()).get("job_id")).split(".")[0] for f in jobs}
        out = subprocess.run(["qstat"], capture_output=True, text=True, check=False).stdout
        return sum(1 for line in out.splitlines()[2:] if line.split() and line.split()[0] in ids)
    count = 0
    for process in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        if str(folder) in cmdline and "/_pilots/" in cmdline and "python" in cmdline.split()[0]:
            count += 1
    return count


def runs(folder: Path) -> dict[int, list[str]]:
    found = {}
    for log in (folder / "runs").glob("*.log"):
        found[int(log.stem)] = [line.split()[0] for line in log.read_text().splitlines() if line.strip()]
    return found


def wait(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def scenario(name: str, system: str, root: Path) -> tuple[int, int, float | None]:
    """(exit status, pilots allocated when the run ended, seconds until none was; None: not within 120 s)."""
    folder = root / name
    folder.mkdir()
    shutil.copy(WORKFLOW, folder / "pilots.py")
    (folder / "settings.json").write_text(json.dumps({"pilot_idle_timeout": 120, "heartbeat_timeout": 10,
                                                      "output_wait_timeout": 5, "max_resubmissions": 0}))
    env = {k: v for k, v in os.environ.items() if k != "B2BATCH_SETTINGS"}
    base = [sys.executable, "pilots.py", "--system", system, "--pilots", "2"]
    args = {"done": ["--n", "20"], "failed": ["--n", "6", "--segv", "2"],
            "SIGINT": ["--n", "6", "--slow", "-2", "--seconds", "30"],
            "SIGTERM": ["--n", "6", "--slow", "-2", "--seconds", "30"],
            "restart": ["--only-leaves", "--n", "4", "--slow", "3", "--seconds", "6"]}[name]
    process = subprocess.Popen(base + args, cwd=folder, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    if name.startswith("SIG"):
        wait(lambda: len(runs(folder)) >= 2, 300)
        process.send_signal(getattr(signal, name))
    if name == "restart":
        wait(lambda: all(runs(folder).get(i, [""])[-1] == "end" for i in range(3)) and 3 in runs(folder), 300)
        process.kill()
        process.wait()
        wait(lambda: runs(folder).get(3, [""])[-1] == "end", 120)
        print(f"  restart: {allocated(system, folder)} pilot(s) left by the SIGKILLed steering process", flush=True)
        process = subprocess.Popen(base + args, cwd=folder, env=env, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    status = process.wait(timeout=600)
    ended = time.monotonic()
    at_end = allocated(system, folder)
    gone = wait(lambda: allocated(system, folder) == 0, 120)
    return status, at_end, (time.monotonic() - ended) if gone else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--system", default="slurm", choices=["slurm", "sge", "local"])
    parser.add_argument("--scenarios", nargs="+", default=list(SCENARIOS), choices=SCENARIOS)
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="b2batch-pilot-lifecycle-"))
    print(f"{args.system}, pilot_jobs 2, pilot_idle_timeout 120 s; folders in {root}", flush=True)
    print("| scenario | exit status | pilots allocated when the run ended | seconds until none | 10 s later |")
    print("| --- | --- | --- | --- | --- |", flush=True)
    worst = 0.0
    for name in args.scenarios:
        status, at_end, seconds = scenario(name, args.system, root)
        worst = max(worst, seconds if seconds is not None else float("inf"))
        shown = f"{seconds:.1f}" if seconds is not None else "> 120"
        later = "0" if seconds is not None and seconds <= 10 else "some left"
        print(f"| {name} | {status} | {at_end} | {shown} | {later} |", flush=True)
    print(f"worst: {worst:.1f} s (target: none allocated 10 s after the run ended)")
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
