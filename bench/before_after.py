#!/usr/bin/env python3
"""One benchmark at two revisions of b2batch, in alternating rounds of the same sitting: is a change within noise?

Each revision is checked out into a git worktree of its own (``/tmp/b2bench-rev-<sha>``, made once, kept) and
its own copy of the benchmark runs with that worktree first on ``PYTHONPATH`` (the node-side entry point of a
job lives in the package, so pilots and jobs import the same revision). Rounds alternate base, head, base, head
... so that a slow drift of the machine's load falls on both. Per figure it prints the median of each revision,
the ratio head/base, and the noise: the largest relative spread between rounds of one revision. A ratio
inside 1 +- noise is "within noise".

Benchmarks it reads (``--bench``):

- ``steering_scale``: b2batch's steering CPU per job, the same with the simulated jobs' own work (done in the
  steering process: where a new folder's first-touch cost lands moves between the two) and peak RSS at ``--n``
  (``--modes b2batch`` with ``--script-from head`` leaves out luigi's reference);
- ``pilot_throughput``: wall and machine CPU of the pilots row over the raw array, steering CPU per task,
  time per task inside a pilot (the script's JSON line).
- ``job_script_render``: the luigi front-end's make, render and write per job (the script's JSON line; with
  ``--script-from head`` for revisions before it).

    python bench/before_after.py --bench steering_scale --base 638645e --rounds 2 -- --n 10000
    python bench/before_after.py --bench steering_scale --base 638645e --script-from head --rounds 3 -- \
        --n 10000 --modes b2batch
    python bench/before_after.py --bench pilot_throughput --base 638645e -- --parts throughput,steering \
        --batch-sched-delay-0
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]

STEERING_LINE = re.compile(r"^\s*b2batch\s+N=(\d+)\s+CPU\s+\S+ s =\s+([\d.]+) ms/job.*peak RSS\s+([\d.]+) MB", re.M)
WITH_JOBS = re.compile(r"^\s*b2batch\s+N=(\d+)\s.*with the jobs' own work\s+([\d.]+) ms/job", re.M)


def steering_scale(out: str) -> dict[str, float]:
    figures = {}
    for n, ms, rss in STEERING_LINE.findall(out):
        figures[f"steering ms/job N={n}"] = float(ms)
        figures[f"peak RSS MB N={n}"] = float(rss)
    for n, ms in WITH_JOBS.findall(out):
        figures[f"with jobs' work ms/job N={n}"] = float(ms)
    return figures


def pilot_throughput(out: str) -> dict[str, float]:
    line = next(line for line in reversed(out.splitlines()) if line.startswith("{"))
    data = json.loads(line)
    figures = {}
    for key, value in (data.get("pilots_over_raw") or {}).items():
        if value is not None:
            figures[f"pilots/raw {key}"] = value
    if "steering_ms_per_task" in data:
        figures["steering ms/task"] = data["steering_ms_per_task"]
    for key in ("inside_pilots", "inside_steering"):
        if key in data:
            figures[f"{key} ms/task"] = 1000 * data[key]["s_per_task"]
    return figures


def job_script_render(out: str) -> dict[str, float]:
    line = next(line for line in reversed(out.splitlines()) if line.startswith("{"))
    return {key: float(value) for key, value in json.loads(line).items()}


READERS: dict[str, Callable[[str], dict[str, float]]] = {
    "steering_scale": steering_scale, "pilot_throughput": pilot_throughput, "job_script_render": job_script_render}


def worktree(revision: str) -> tuple[str, Path]:
    sha = subprocess.run(["git", "rev-parse", "--short", revision], cwd=ROOT, check=True, capture_output=True,
                         text=True).stdout.strip()
    tree = Path(f"/tmp/b2bench-rev-{sha}")
    if not (tree / "b2batch").is_dir():
        subprocess.run(["git", "worktree", "add", "--force", "--detach", str(tree), sha], cwd=ROOT, check=True,
                       capture_output=True)
    return sha, tree


def run_once(tree: Path, script: Path, arguments: list[str]) -> tuple[str, int]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(tree), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, str(script), *arguments], cwd=tree, env=env, capture_output=True,
                          text=True)
    return done.stdout + done.stderr[-2000:], done.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", required=True, choices=sorted(READERS))
    parser.add_argument("--base", required=True, help="the earlier revision (a commit, tag or branch)")
    parser.add_argument("--head", default="HEAD", help="the later revision (default HEAD)")
    parser.add_argument("--rounds", type=int, default=2, help="runs per revision, alternating (default 2)")
    parser.add_argument("--script-from", choices=["each", "head"], default="each",
                        help="run each revision's own copy of the benchmark (default), or head's against both "
                             "(for options the base's copy lacks, e.g. steering_scale.py --modes b2batch)")
    parser.add_argument("arguments", nargs=argparse.REMAINDER, help="after --: the benchmark's own arguments")
    args = parser.parse_args()
    arguments = args.arguments[1:] if args.arguments[:1] == ["--"] else args.arguments
    revisions = [worktree(args.base), worktree(args.head)]
    print(f"# {args.bench} {' '.join(arguments)}: base {revisions[0][0]}, head {revisions[1][0]}, "
          f"{args.rounds} rounds each, load {os.getloadavg()[0]:.2f}", flush=True)
    seen: dict[str, list[dict[str, float]]] = {sha: [] for sha, _ in revisions}
    for round_ in range(args.rounds):
        for sha, tree in revisions:
            script = (revisions[1][1] if args.script_from == "head" else tree) / "bench" / f"{args.bench}.py"
            out, code = run_once(tree, script, arguments)
            figures = READERS[args.bench](out) if code == 0 else {}
            if not figures:
                print(f"  round {round_ + 1} {sha}: failed (exit {code})\n{out[-3000:]}", file=sys.stderr)
                return 1
            seen[sha].append(figures)
            print(f"  round {round_ + 1} {sha}: " + ", ".join(f"{k} {v:.3g}" for k, v in figures.items()),
                  flush=True)
    base, head = (seen[sha] for sha, _ in revisions)
    print(f"  {'figure':<32} {'base':>9} {'head':>9} {'head/base':>9} {'noise':>7}  verdict")
    for key in base[0]:
        if not all(key in f for f in base + head):
            continue
        b = statistics.median(f[key] for f in base)
        h = statistics.median(f[key] for f in head)
        noise = max((max(f[key] for f in rows) - min(f[key] for f in rows)) / statistics.median(f[key] for f in rows)
                    for rows in (base, head) if statistics.median(f[key] for f in rows))
        ratio = h / b if b else float("nan")
        verdict = "within noise" if abs(ratio - 1) <= noise else ("better" if ratio < 1 else "WORSE")
        print(f"  {key:<32} {b:>9.3g} {h:>9.3g} {ratio:>9.2f} {noise:>7.2f}  {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
