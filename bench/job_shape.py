#!/usr/bin/env python3
"""job_shape auto (the default) on the local Slurm, against references measured in the same run.

Two parts (``--parts``), each row a fresh workflow script (``pilot_throughput.py``'s tasks and script: N tasks
and one aggregate that requires them all), run as a subprocess in a folder of its own, the queue free of this
benchmark's jobs before each row:

1. short: ``--n`` trivial tasks (each writes one small file) + the aggregate with **default settings**
   (``job_shape`` auto, no ``pilot_jobs``), against ONE raw ``sbatch --array=1-N`` of N ``echo`` jobs (the
   limit: what Slurm itself needs for N jobs). Targets (issue 28): wall time at most **0.25x** the raw array's,
   machine CPU at most **1x** its CPU (the busy time of all CPUs from /proc/stat over each row's window, and the
   CPU of a cpuacct cgroup of Slurm's daemons and this benchmark, as ``pilot_throughput.py`` measures them).
2. long: ``--long-n`` tasks that sleep ``--long-seconds`` each + the aggregate, with default settings against
   ``job_shape = "job_per_task"`` (a settings file named by ``B2BATCH_SETTINGS``). Target: wall time within
   **1.1x** of one job per task (no penalty for long tasks). The issue's figure is 40 tasks of 60 s; on a
   machine shared with others ``--long-n 16 --long-seconds 30`` is quicker (say so with the figures).

Each b2batch row prints which shape the run chose for each family (the report's ``job_shapes``). The last lines
are the ratios and one JSON line of all figures. Exit status 0 when every measurement ran and every job
succeeded. Jobs are named ``b2benchs<tag>...``; whatever of them is left (interrupt, error) is cancelled at exit.
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
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pilot_throughput import TASK_MODULE, TASKS, WORKFLOW, Bench, CpuMeter, fmt, ratio
from slurm_throughput import Cluster, log

PARTS = ("short", "long")

#: The benchmark's tasks: pilot_throughput's, whose trivial task first sleeps B2BENCH_SLEEP seconds (0: none).
SLEEPING_TASKS = TASKS.replace(
    "    def run(self):\n",
    "    def run(self):\n        time.sleep(float(os.environ.get(\"B2BENCH_SLEEP\", \"0\")))\n", 1)
assert SLEEPING_TASKS != TASKS, "pilot_throughput's trivial task changed: adapt the sleep"

#: The workflow script, which also prints the run's job shapes into its stats.
SHAPED_WORKFLOW = WORKFLOW.replace(
    '"calls": dict(runs[0].run.scheduler_calls) if runs else {},',
    '"calls": dict(runs[0].run.scheduler_calls) if runs else {},\n'
    '        "job_shapes": dict(runs[0].run.shapes) if runs else {},')
assert SHAPED_WORKFLOW != WORKFLOW, "pilot_throughput's workflow changed: adapt the job shapes"


def shapes_of(row: dict[str, Any]) -> str:
    shapes = row.get("job_shapes") or {}
    return "; ".join(f"{family}: {entry['shape']} ({entry['why']}), tasks {entry['units']}"
                     for family, entry in sorted(shapes.items())) or "none shaped (one job per task)"


def r2(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1000, help="trivial tasks of part short (default 1000)")
    parser.add_argument("--long-n", type=int, default=40, help="tasks of part long (default 40)")
    parser.add_argument("--long-seconds", type=float, default=60.0, help="seconds each task of part long sleeps")
    parser.add_argument("--parts", default=",".join(PARTS), help="which parts, comma-separated (default: both)")
    parser.add_argument("--idle-sample", type=float, default=3.0,
                        help="seconds the idle machine's CPU use is sampled before each row (default 3)")
    parser.add_argument("--no-cgroup", action="store_true",
                        help="do not move the Slurm daemons into a cpuacct cgroup (no 'Slurm + ours' CPU figure)")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per measurement (default 3600)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (logs, job files)")
    args = parser.parse_args()
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    if parts - set(PARTS):
        parser.error(f"unknown part(s) {sorted(parts - set(PARTS))}; choose from {', '.join(PARTS)}")
    for tool in ("sbatch", "squeue", "scancel"):
        if shutil.which(tool) is None:
            print(f"job_shape: {tool} is not on PATH; start the cluster with tests/clusters/slurm.sh start",
                  file=sys.stderr)
            return 1
    prefix = f"b2benchs{uuid.uuid4().hex[:8]}"
    cluster = Cluster(prefix)
    folder = Path(tempfile.mkdtemp(prefix="b2bench-shape-"))
    (folder / f"{TASK_MODULE}.py").write_text(SLEEPING_TASKS)
    (folder / "workflow.py").write_text(SHAPED_WORKFLOW)
    env = {**os.environ, "B2BENCH_JOB_NAME": prefix}
    for name in ("B2BATCH_SETTINGS", "B2LUIGI_SETTINGS_JSON", "B2BENCH_IN_PROCESS", "B2BENCH_PILOT_JOBS",
                 "B2BENCH_TASKS_PER_JOB"):
        env.pop(name, None)
    args.keep = args.keep  # Bench reads args.keep, args.idle_sample and args.timeout
    meter = CpuMeter(prefix, not args.no_cgroup)
    bench = Bench(args, folder, cluster, env, meter)
    previous_sigterm = signal.signal(signal.SIGTERM, _interrupt)
    figures: dict[str, Any] = {}
    try:
        log(f"folder {folder}, job names {prefix}*; parts {', '.join(p for p in PARTS if p in parts)}; CPU of "
            f"Slurm + ours: {meter.note}")
        subprocess.run([sys.executable, "-c", "import b2batch, luigi"], check=True, timeout=120)  # warm the caches
        if "short" in parts:
            raw = bench.rows["raw"] = bench.raw(args.n)
            auto = bench.rows["auto"] = bench.b2batch("auto", "default settings (auto)", args.n, "slurm",
                                                      {"B2BENCH_SLEEP": "0"})
            log(f"    job shapes: {shapes_of(auto)}")
            figures["short"] = {
                "n": args.n, "raw_wall": raw["wall"], "auto_wall": auto["wall"],
                "raw_machine_cpu": raw["machine_cpu"], "auto_machine_cpu": auto["machine_cpu"],
                "wall_ratio": ratio(auto["wall"], raw["wall"]),
                "machine_cpu_ratio": ratio(auto["machine_cpu"], raw["machine_cpu"]),
                "slurm_ours_cpu_ratio": ratio(auto.get("slurm_ours_cpu"), raw.get("slurm_ours_cpu")),
                "steering_cpu": auto["script_cpu"], "job_shapes": auto.get("job_shapes")}
        if "long" in parts:
            sleep = {"B2BENCH_SLEEP": str(args.long_seconds)}
            (folder / "settings-job_per_task.json").write_text(json.dumps({"job_shape": "job_per_task"}))
            per_task = bench.rows["job_per_task"] = bench.b2batch(
                "job_per_task", f"job_shape job_per_task, tasks of {args.long_seconds:g} s", args.long_n, "slurm",
                {**sleep, "B2BATCH_SETTINGS": str(folder / "settings-job_per_task.json")})
            auto_long = bench.rows["auto_long"] = bench.b2batch(
                "auto_long", f"default settings (auto), tasks of {args.long_seconds:g} s", args.long_n, "slurm",
                sleep)
            log(f"    job shapes: {shapes_of(auto_long)}")
            figures["long"] = {
                "n": args.long_n, "seconds": args.long_seconds, "job_per_task_wall": per_task["wall"],
                "auto_wall": auto_long["wall"], "wall_ratio": ratio(auto_long["wall"], per_task["wall"]),
                "job_shapes": auto_long.get("job_shapes")}
    except KeyboardInterrupt as e:
        log(f"interrupted ({e}); cancelling this benchmark's jobs")
        bench.ok = False
    finally:
        signal.signal(signal.SIGTERM, previous_sigterm)
        left = cluster.cancel_ours()
        if left:
            log(f"cancelled {left} job(s) of this benchmark left in the queue")
        meter.close()
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    print()
    if "short" in figures:
        f = figures["short"]
        print(f"short, N={f['n']} trivial tasks + aggregate, default settings vs a raw array of N echo jobs: "
              f"wall {fmt(f['auto_wall'])} s vs {fmt(f['raw_wall'])} s = {r2(f['wall_ratio'])}x (target <= 0.25x); "
              f"machine CPU {fmt(f['auto_machine_cpu'])} s vs {fmt(f['raw_machine_cpu'])} s = "
              f"{r2(f['machine_cpu_ratio'])}x (target <= 1x); Slurm + ours {fmt(f['slurm_ours_cpu_ratio'])}x")
    if "long" in figures:
        f = figures["long"]
        print(f"long, {f['n']} tasks of {f['seconds']:g} s + aggregate, default settings vs job_per_task: wall "
              f"{fmt(f['auto_wall'])} s vs {fmt(f['job_per_task_wall'])} s = {r2(f['wall_ratio'])}x (target <= 1.1x)")
    print(json.dumps({"figures": figures, "rows": bench.rows}, default=str))
    return 0 if bench.ok and figures else 1


if __name__ == "__main__":
    sys.exit(main())
