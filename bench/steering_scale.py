#!/usr/bin/env python3
"""How the steering process's CPU time and memory grow with the number of jobs, against luigi's own.

A run of N jobs should cost the submit host about N times what one job costs: CPU time and memory per job
that grow with N mean work per job per poll (e.g. asking every running job something for every result).
This script measures that without a cluster, so that only the steering process is measured:

  b2batch   ``b2batch.process(Aggregate(n=N), batch=True, workers=N + 1)`` on a simulated scheduler (a
            :class:`b2batch.systems.scheduler.SchedulerProcess` whose status query is a function): it takes
            arrays like Slurm, lets the jobs "finish" at a fixed rate (``--rate`` jobs per second, like a
            cluster that drains at a steady throughput), and for each finished job writes what a real job
            writes (its output, result file and exit-code file), so b2batch's whole steering path runs:
            submission, the monitor's polls, ``is_alive`` of every running job, output checks, luigi's
            worker and scheduler;
  luigi     the reference: the same graph built by plain luigi in-process (``workers=1``, the trivial
            tasks' ``run`` writing the same files): luigi's own cost per task for this graph.

Each measurement is a fresh Python process (``--child``); its CPU time counts from just before
``process()``/``build()`` to just after, peak memory is the process's ``ru_maxrss``. Output: a line per
measurement with CPU time per job and peak RSS, then the growth from the smallest N to the largest of the
CPU time per job (1.0 = linear) for b2batch and for luigi, and b2batch's CPU time per job over luigi's.

    python3 bench/steering_scale.py                   # N = 100, 300, 1000, 3000 at 50 jobs/s; about 3 minutes
    python3 bench/steering_scale.py --n 200 2000 --rate 100 --profile

Exit status 0 when every run completed its graph.
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
from pathlib import Path
from typing import Any


def child(mode: str, n: int, rate: float, profile: str | None) -> dict[str, Any]:
    """One measurement in this (fresh) process."""
    import luigi

    import b2batch
    from b2batch import systems
    from b2batch.monitor import NativeState
    from b2batch.process import JobStatus
    from b2batch.systems.scheduler import SchedulerProcess

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

    class Simulated(SchedulerProcess):
        """A scheduler that finishes its queued jobs at ``rate`` per second, in submission order."""

        system_name = "simulated"
        array_index = "SIMULATED"
        state_map = {"PENDING": JobStatus.idle, "COMPLETED": JobStatus.successful}
        queue: dict[str, Any] = {}
        next_id = 0
        clock = 0.0  # when the last job submitted so far will finish

        @classmethod
        def _take(cls, job: Any) -> str:
            cls.next_id += 1
            cls.clock = max(cls.clock, time.monotonic()) + 1.0 / rate
            job_id = str(cls.next_id)
            cls.queue[job_id] = (cls.clock, job.task, job.job_files)
            return job_id

        @classmethod
        def submit_group(cls, group: list[Any]) -> None:
            monitor = cls.monitor()
            for job in group:
                job.job_id = cls._take(job)
                monitor.track(job.job_id)
            monitor.invalidate()

        def start_job(self) -> None:
            type(self).submit_group([self])

        @classmethod
        def query_states(cls, job_ids: list[str]) -> dict[str, NativeState]:
            now, states = time.monotonic(), {}
            for job_id, (finish, task, files) in list(cls.queue.items()):
                if finish > now:
                    states[job_id] = NativeState("PENDING")
                    continue
                if finish > 0:  # finishes now: write what the job would
                    task.run()
                    files.result.write_text(json.dumps({"status": "DONE"}))
                    files.exit_code.write_text("0\n")
                    cls.queue[job_id] = (-now, task, files)
                if now + finish < 10:  # listed as COMPLETED for 10 s, as squeue does for MinJobAge
                    states[job_id] = NativeState("COMPLETED")
                else:
                    del cls.queue[job_id]
            return states

        @classmethod
        def kill_jobs(cls, jobs: list[Any]) -> None:
            for job in jobs:
                cls.queue.pop(job.job_id, None)

        def kill_job(self) -> None:
            self.queue.pop(self.job_id, None)

    systems.BUILT_IN["simulated"] = f"{__name__}:Simulated"
    globals()["Simulated"] = Simulated

    def cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    import cProfile

    profiler = cProfile.Profile() if profile else None
    start_cpu, start = cpu(), time.monotonic()
    if profiler:
        profiler.enable()
    if mode == "luigi":
        ok = luigi.build([Aggregate(n=n)], local_scheduler=True, workers=1, log_level="WARNING")
    else:
        b2batch.set_setting("batch_system", "simulated")
        result = b2batch.process(Aggregate(n=n), batch=True, workers=n + 1, exit_on_failure=False)
        ok = bool(getattr(result, "scheduling_succeeded", result))
    if profiler:
        profiler.disable()
        profiler.dump_stats(profile)
    extra = {}
    if mode == "b2batch":
        extra = {"polls": Simulated.monitor().polls, "submissions": Simulated.submitter().submissions}
    return {"cpu": cpu() - start_cpu, "wall": time.monotonic() - start,
            "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "complete": Aggregate(n=n).complete() and bool(ok), **extra}


def measure(mode: str, n: int, rate: float, profile: Path | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="b2bench-scale-") as folder:
        stats = Path(folder) / "stats.json"
        command = [sys.executable, str(Path(__file__).resolve()), "--child", mode, str(n), "--rate", str(rate),
                   "--stats", str(stats)]
        if profile:
            command += ["--profile-to", str(profile)]
        done = subprocess.run(command, cwd=folder, capture_output=True, text=True)
        if done.returncode != 0 or not stats.exists():
            sys.stderr.write(done.stdout[-3000:] + done.stderr[-3000:])
            return {"cpu": float("nan"), "wall": float("nan"), "rss_mb": float("nan"), "complete": False}
        return json.loads(stats.read_text())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, nargs="+", default=[100, 300, 1000, 3000], help="numbers of jobs")
    parser.add_argument("--rate", type=float, default=50.0, help="jobs the simulated scheduler finishes per s")
    parser.add_argument("--repeat", type=int, default=1, help="measurements per point (median)")
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
    for n in sorted(args.n):
        for mode in ("luigi", "b2batch"):
            rows = [measure(mode, n, args.rate, None) for _ in range(args.repeat)]
            all_complete &= all(row["complete"] for row in rows)
            cpu = statistics.median(row["cpu"] for row in rows)
            rss = statistics.median(row["rss_mb"] for row in rows)
            wall = statistics.median(row["wall"] for row in rows)
            per_job[mode][n] = cpu / n
            extra = (f"   polls {rows[0].get('polls')}, submissions {rows[0].get('submissions')}"
                     if mode == "b2batch" else "")
            print(f"  {mode:8} N={n:<6} CPU {cpu:7.2f} s = {1000 * cpu / n:6.2f} ms/job   wall {wall:7.1f} s   "
                  f"peak RSS {rss:6.0f} MB   complete {all(row['complete'] for row in rows)}{extra}", flush=True)
        print(f"  ratio b2batch / luigi at N={n}: {per_job['b2batch'][n] / per_job['luigi'][n]:.2f} "
              f"(CPU per job)", flush=True)
    small, large = min(args.n), max(args.n)
    for mode in ("b2batch", "luigi"):
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
