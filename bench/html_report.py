"""The HTML run report at scale: a synthetic report of N jobs (default 10,000: a part as own jobs, the rest
as tasks in pilots, some failed with log tails) -> the page's size, the time to make it, and the time headless
chromium takes to load it (``--dump-dom`` wall), beside loading an empty page in the same run.

    python3 bench/html_report.py [--n 10000] [--repeat 3] [--keep]

Targets (issue 29): at most 5 MB for 10,000 jobs, and shown in under 2 s here.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from b2batch.display.html import read_report, write_html


def synthetic(n: int, pilots: int, own: int, failures: int, families: int = 6) -> dict:
    """A report of ``n`` tasks: ``own`` as jobs of their own, the others in ``pilots`` pilot jobs; every
    ``n // failures``-th failed, with a log tail. Queue waits of seconds to minutes, run times of minutes."""
    start = 1_800_000_000.0
    jobs = []
    pilot_clock = [start + 30.0 * p for p in range(pilots)]
    step = max(1, n // failures) if failures else n + 1
    for i in range(n):
        family = f"Step{i % families}"
        state = "failed" if i % step == step - 1 else "done"
        job_id = str(5_000_000 + i)
        if i < own:
            submitted = start + i * 0.2
            started = submitted + 2 + (i * 7919) % 900
            ended = started + 60 + (i * 104729) % 1800
            carrier = ""
            history = [(submitted, "submitted"), (started, "running"), (ended, state)]
        else:
            p = i % pilots
            job_id = f"{6_000_000 + p}"
            submitted = start + (i - own) * 0.01
            started = max(pilot_clock[p], submitted)
            ended = started + 20 + (i * 31) % 300
            pilot_clock[p] = ended
            carrier = f"pilot job {job_id} on slurm (its log: /data/logs/pilots/pilot-{p}/stderr)"
            history = [(submitted, "submitted"), (ended, state)]
        jobs.append({
            "task_id": f"{family}_{i}_0123456789", "family": family, "params": {"run": str(i), "exp": "12"},
            "system": "slurm-pilots" if carrier else "slurm", "job_ids": [job_id], "state": state,
            "submitted_at": submitted, "started_at": started, "ended_at": ended,
            "reason": (f"Task {family} (run={i}, exp=12) failed: job {job_id} on slurm exited with code 1.\n"
                       f"stdout: /data/logs/run={i}/{family}/stdout") if state == "failed" else "",
            "resubmissions": [], "stdout": f"/data/logs/run={i}/exp=12/{family}/stdout",
            "stderr": f"/data/logs/run={i}/exp=12/{family}/stderr",
            "stderr_tail": "\n".join(f"Traceback line {k} of task {i}: " + "x" * 60 for k in range(10))
            if state == "failed" else "",
            "carrier": carrier,
            "usage": {"wall": ended - started, "cpu": (ended - started) * (0.3 + (i % 7) / 10),
                      "max_rss": (200 + (i * 13) % 1800) * 2**20, "req_mem": 2000 * 2**20, "req_cpus": 1,
                      "host": f"wn{i % 97:03d}", "cause": "memory" if state == "failed" and i % 3 == 0 else "",
                      "source": "sacct+wrapper"},
            "history": [{"at": t, "state": s, "job_id": job_id} for t, s in history]})
    ended_at = max(j["ended_at"] for j in jobs)
    failed = sum(j["state"] == "failed" for j in jobs)
    by_family: dict = {}
    for j in jobs:
        counts = by_family.setdefault(j["family"], {}).setdefault(j["system"], {})
        counts[j["state"]] = counts.get(j["state"], 0) + 1
    return {"b2batch_version": "bench", "script": "/data/workflow.py", "argv": ["--batch"], "mode": "batch",
            "started_at": start, "ended_at": ended_at, "started": "2027-01-15T08:00:00+0000",
            "ended": "2027-01-15T20:00:00+0000", "elapsed_seconds": ended_at - start, "interrupted": False,
            "failed": bool(failed), "exit_status": int(bool(failed)), "luigi_status": "SCHEDULING_FAILED",
            "totals": {"done": n - failed, "failed": failed, "not run": 0, "missing": 0, "unfinished": 0,
                       "already complete": 0, "jobs": own + pilots, "resubmissions": 0},
            "by_family": by_family, "scheduler_calls": {"sbatch": 120, "squeue": 900}, "jobs": jobs,
            "other_tasks": [], "trace": "",
            "efficiency": {f"Step{f}": {"system": "slurm", "jobs": n // families, "cpu_efficiency": 0.6,
                                        "memory_efficiency": 0.55, "cpu_hours": 100.0 + f, "peak_memory_mb": 1999.0,
                                        "p95_memory_mb": 1910.0, "requested_memory_mb": 2000.0,
                                        "killed_for_memory": 10, "killed_for_time": 0,
                                        "failed_nodes": {f"wn{k:03d}": 3 for k in range(20)},
                                        "sources": {"sacct+wrapper": n // families}, "suggested_memory_mb": 2300,
                                        "suggested_request": "--mem=2300M",
                                        "suggested_setting": 'slurm_settings={"mem": "2300M"}'}
                           for f in range(families)}}


def load_seconds(page: Path, folder: Path) -> float:
    """Wall time of headless chromium opening ``page`` and printing its DOM."""
    started = time.perf_counter()
    run = subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                          f"--user-data-dir={folder / 'profile'}", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=300, check=False)
    took = time.perf_counter() - started
    if run.returncode != 0 or "</html>" not in run.stdout:
        sys.exit(f"chromium could not load {page}: {run.stderr[-2000:]}")
    return took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10_000, help="jobs in the report (default 10,000)")
    parser.add_argument("--repeat", type=int, default=3, help="browser loads of each page (median is printed)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()
    if shutil.which("chromium") is None:
        sys.exit("chromium is not installed (apt-get install --no-install-recommends chromium)")
    folder = Path(tempfile.mkdtemp(prefix="b2batch-bench-html-"))
    try:
        print(f"load average {os.getloadavg()[0]:.2f}; {args.n:,} jobs")
        report_path = folder / "b2batch-run-bench.report.json"
        report_path.write_text(json.dumps(synthetic(args.n, pilots=40, own=args.n // 5, failures=args.n // 50)))
        started = time.perf_counter()
        page = write_html(read_report(report_path), report_path)
        made = time.perf_counter() - started
        empty = folder / "empty.html"
        empty.write_text("<!DOCTYPE html><html><head><title>empty</title></head><body></body></html>")
        loads = {"empty": [], "report": []}
        for _ in range(args.repeat):
            loads["empty"].append(load_seconds(empty, folder))
            loads["report"].append(load_seconds(page, folder))
        empty_s, page_s = statistics.median(loads["empty"]), statistics.median(loads["report"])
        print(f"JSON report: {report_path.stat().st_size / 1e6:.2f} MB")
        print(f"HTML report: {page.stat().st_size / 1e6:.2f} MB (target: at most 5 MB), made in {made:.2f} s "
              f"(reading the JSON included)")
        print(f"chromium --dump-dom: empty page {empty_s:.2f} s, the report {page_s:.2f} s "
              f"(median of {args.repeat}; the report's own share {page_s - empty_s:.2f} s; target: under 2 s)")
    finally:
        if args.keep:
            print(f"kept {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
