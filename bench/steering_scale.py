#!/usr/bin/env python3
"""How the steering process's CPU time and memory grow with the number of jobs, against luigi's own.

A run of N jobs should cost the submit host about N times what one job costs: CPU time and memory per job
that grow with N mean work per job per poll or per task handed out. This script measures that without a
cluster, so that only the steering process is measured:

  b2batch   ``b2batch.process(Aggregate(n=N), batch=True, workers=N + 1)`` on a simulated scheduler: an
            engine :class:`b2batch.engine.BatchSystem` (the engine's public interface, named by the
            ``batch_system`` setting) that takes whole arrays, lets the jobs "finish" at a fixed rate
            (``--rate`` jobs per second, like a cluster that drains at a steady throughput), and for each
            finished job writes what a real job writes (its output, result file and exit-code file), so
            b2batch's whole steering path runs: the graph runner, job files and wrappers, submission, polls,
            output checks;
  luigi     the reference: the same graph built by plain luigi in-process (``workers=1``, the trivial
            tasks' ``run`` writing the same files): luigi's own cost per task for this graph. It is stopped
            after ``--luigi-limit`` seconds (luigi's scheduler is quadratic: it does not finish N=10,000 in
            10 minutes).

Each measurement is a fresh Python process (``--child``); its CPU time counts from just before
``process()``/``build()`` to just after, less (for b2batch) what the simulated jobs do that real jobs do on
their nodes (run the task, write its result and exit-code files); luigi's figure includes its tasks' runs,
which write the same one small file each. Peak memory is the process's ``ru_maxrss``. Output: a line per
measurement with CPU time per job and peak RSS, then the growth from the smallest N to the largest of the
CPU time per job (1.0 = linear), and b2batch's CPU time per job over luigi's where luigi finished.

    python3 bench/steering_scale.py                          # N = 1,000, 10,000 and 100,000 at 500 jobs/s
    python3 bench/steering_scale.py --n 1000 3000 --rate 100 --profile

Exit status 0 when every b2batch run completed its graph.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import deque
from pathlib import Path
from typing import Any


def child(mode: str, n: int, rate: float, profile: str | None) -> dict[str, Any]:
    """One measurement in this (fresh) process."""
    import luigi

    import b2batch
    from b2batch.engine import BatchSystem, JobState, JobStatus

    base = luigi.Task if mode == "luigi" else b2batch.Task

    class Trivial(base):  # type: ignore[misc, valid-type]
        i = luigi.IntParameter()

        def output(self) -> Any:
            return luigi.LocalTarget(f"results/trivial/i={self.i}/trivial.txt")

        def run(self) -> None:
            with self.output().open("w") as f:
                f.write(f"{self.i}\n")

    class Aggregate(base):  # type: ignore[misc, valid-type]
        n = luigi.IntParameter()
        run_local = True  # the aggregate runs in the steering process in both measurements

        def requires(self) -> Any:
            return [Trivial(i=i) for i in range(self.n)]

        def output(self) -> Any:
            return luigi.LocalTarget(f"results/aggregate/n={self.n}/aggregate.txt")

        def run(self) -> None:
            total = sum(int(Path(t.path).read_text()) for t in self.input())
            with self.output().open("w") as f:
                f.write(f"{total}\n")

    stats: dict[str, float] = {"queries": 0, "submissions": 0, "node_cpu": 0.0, "node_sys": 0.0}

    class Simulated(BatchSystem):
        """A scheduler that takes arrays and finishes its queued jobs at ``rate`` per second, in submission
        order, answering one status query at most every ``poll_interval`` for all jobs."""

        name = "simulated"

        def __init__(self, run: Any) -> None:
            super().__init__(run)
            self.queue: dict[str, tuple[float, Any]] = {}
            self.order: deque[str] = deque()
            self.next_id = 0
            self.clock = 0.0  # when the last job submitted so far will finish
            self.asked_at = float("-inf")

        def groups(self, jobs: list[Any]) -> list[list[Any]]:
            size = int(b2batch.get_setting("max_array_size"))
            return [jobs[k:k + size] for k in range(0, len(jobs), size)]

        def submit(self, group: list[Any]) -> None:
            stats["submissions"] += 1
            for job in group:
                self.next_id += 1
                self.clock = max(self.clock, time.monotonic()) + 1.0 / rate
                job.job_id = str(self.next_id)
                self.queue[job.job_id] = (self.clock, job)
                self.order.append(job.job_id)

        def states(self, jobs: list[Any]) -> dict[Any, JobState]:
            now = time.monotonic()
            if now - self.asked_at < float(b2batch.get_setting("poll_interval")):
                return {}
            self.asked_at = now
            stats["queries"] += 1
            found = {}
            while self.order and self.queue.get(self.order[0], (now + 1,))[0] <= now:
                job_id = self.order.popleft()
                _finish, job = self.queue.pop(job_id)
                node_started, node_sys = cpu(), sys_cpu()  # what the job would do on its node
                job.payload.run()
                job.files.result.write_text('{"status": "DONE"}')
                job.files.exit_code.write_text("0\n")
                stats["node_cpu"] += cpu() - node_started
                stats["node_sys"] += sys_cpu() - node_sys
                found[job] = JobState(JobStatus.successful)
            return found

        def cancel(self, jobs: list[Any]) -> None:
            for job in jobs:
                self.queue.pop(str(job.job_id), None)

    def cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    def sys_cpu() -> float:
        return resource.getrusage(resource.RUSAGE_SELF).ru_stime

    import cProfile

    profiler = cProfile.Profile() if profile else None
    start_cpu, start_sys, start = cpu(), sys_cpu(), time.monotonic()
    if profiler:
        profiler.enable()
    if mode == "luigi":
        ok = luigi.build([Aggregate(n=n)], local_scheduler=True, workers=1, log_level="WARNING")
    else:
        b2batch.set_setting("batch_system", Simulated)
        for setting in ("task_file_dir", "log_dir"):  # in this measurement's folder, not beside the script
            b2batch.set_setting(setting, str(Path.cwd() / setting))
        b2batch.set_setting("poll_interval", 1.0)
        # one job per task, as measured before job_shape auto: it would send these trivial tasks to pilots,
        # which the simulated scheduler does not run
        b2batch.set_setting("job_shape", "job_per_task")
        result = b2batch.process(Aggregate(n=n), batch=True, workers=n + 1, exit_on_failure=False,
                                 log_level="WARNING")
        ok = bool(getattr(result, "scheduling_succeeded", result))
    if profiler:
        profiler.disable()
        profiler.dump_stats(profile)
    return {"cpu": cpu() - start_cpu - stats["node_cpu"], "sys": sys_cpu() - start_sys - stats["node_sys"], "wall": time.monotonic() - start,
            "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "complete": Aggregate(n=n).complete() and bool(ok), **stats}


def measure(mode: str, n: int, rate: float, profile: Path | None, limit: float | None = None) -> dict[str, Any]:
    failed = {"cpu": float("nan"), "wall": float("nan"), "rss_mb": float("nan"), "complete": False}
    with tempfile.TemporaryDirectory(prefix="b2bench-scale-") as folder:
        stats = Path(folder) / "stats.json"
        command = [sys.executable, str(Path(__file__).resolve()), "--child", mode, str(n), "--rate", str(rate),
                   "--stats", str(stats)]
        if profile:
            command += ["--profile-to", str(profile)]
        try:
            done = subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=limit)
        except subprocess.TimeoutExpired:
            return {**failed, "timed_out": limit}
        if done.returncode != 0 or not stats.exists():
            sys.stderr.write(done.stdout[-3000:] + done.stderr[-3000:])
            return failed
        return json.loads(stats.read_text())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, nargs="+", default=[1000, 10_000, 100_000], help="numbers of jobs")
    parser.add_argument("--rate", type=float, default=500.0, help="jobs the simulated scheduler finishes per s")
    parser.add_argument("--luigi-limit", type=float, default=600.0,
                        help="seconds after which the luigi reference is stopped")
    parser.add_argument("--repeat", type=int, default=1, help="measurements per point (median)")
    parser.add_argument("--modes", default="luigi,b2batch",
                        help="what to measure: luigi,b2batch (default) or one of them (bench/before_after.py: b2batch)")
    parser.add_argument("--profile", action="store_true", help="profile b2batch at the largest N")
    parser.add_argument("--child", nargs=2, metavar=("MODE", "N"), help=argparse.SUPPRESS)
    parser.add_argument("--stats", help=argparse.SUPPRESS)
    parser.add_argument("--profile-to", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        stats = child(args.child[0], int(args.child[1]), args.rate, args.profile_to)
        Path(args.stats).write_text(json.dumps(stats))
        return 0

    print(f"# steering cost per job; simulated scheduler finishing {args.rate:g} jobs/s; "
          f"load {os.getloadavg()[0]:.2f}", flush=True)
    per_job: dict[str, dict[int, float]] = {"b2batch": {}, "luigi": {}}
    all_complete = True
    luigi_gave_up = False
    for n in sorted(args.n):
        for mode in [m for m in ("luigi", "b2batch") if m in args.modes.split(",")]:
            if mode == "luigi" and luigi_gave_up:
                print(f"  luigi    N={n:<6} not run: it did not finish a smaller N within {args.luigi_limit:g} s",
                      flush=True)
                continue
            smaller = [m for m in per_job["luigi"] if m < n]
            if mode == "luigi" and smaller:  # its CPU per job grows about with N: the time with N squared
                m = max(smaller)
                expected = per_job["luigi"][m] * n * n / m
                if expected > 3 * args.luigi_limit:
                    print(f"  luigi    N={n:<6} not run: from N={m} it would take about {expected / 3600:.1f} h, "
                          f"far beyond --luigi-limit {args.luigi_limit:g} s", flush=True)
                    continue
            limit = args.luigi_limit if mode == "luigi" else None
            rows = [measure(mode, n, args.rate, None, limit) for _ in range(args.repeat)]
            if mode == "luigi" and any(row.get("timed_out") for row in rows):
                luigi_gave_up = True
                print(f"  luigi    N={n:<6} did not finish within {args.luigi_limit:g} s", flush=True)
                continue
            complete = all(row["complete"] for row in rows)
            all_complete &= complete or mode == "luigi"
            cpu = statistics.median(row["cpu"] for row in rows)
            rss = statistics.median(row["rss_mb"] for row in rows)
            wall = statistics.median(row["wall"] for row in rows)
            per_job[mode][n] = cpu / n
            sys_part = statistics.median(row.get("sys", float("nan")) for row in rows)
            # With the simulated jobs' own work (their run(), result and exit-code files, done in this process):
            # which side first touches a new folder tree decides where the file system's cost lands.
            total = statistics.median(row["cpu"] + row.get("node_cpu", 0.0) for row in rows)
            extra = (f"   of which kernel (file system) {1000 * sys_part / n:5.2f} ms/job   with the jobs' own work "
                     f"{1000 * total / n:5.2f} ms/job   status queries {rows[0].get('queries')}, submissions "
                     f"{rows[0].get('submissions')}" if mode == "b2batch" else "")
            print(f"  {mode:8} N={n:<6} CPU {cpu:8.2f} s = {1000 * cpu / n:6.2f} ms/job   wall {wall:7.1f} s   "
                  f"peak RSS {rss:6.0f} MB   complete {complete}{extra}", flush=True)
        if n in per_job["luigi"] and n in per_job["b2batch"]:
            print(f"  ratio b2batch / luigi at N={n}: {per_job['b2batch'][n] / per_job['luigi'][n]:.2f} "
                  f"(CPU per job)", flush=True)
    small, large = min(args.n), max(args.n)
    for mode in ("b2batch", "luigi"):
        if small in per_job[mode] and large in per_job[mode]:
            growth = per_job[mode][large] / per_job[mode][small]
            print(f"growth of CPU per job from N={small} to N={large}, {mode}: {growth:.2f} (1.0 = linear)")
    if args.profile:
        import pstats

        with tempfile.TemporaryDirectory() as folder:
            out = Path(folder) / "profile"
            measure("b2batch", large, args.rate, out)
            pstats.Stats(str(out)).sort_stats("cumulative").print_stats(30)
    return 0 if all_complete else 1


if __name__ == "__main__":
    sys.exit(main())
