#!/usr/bin/env python3
"""Trivial calls with default settings: ``b2batch.Pool.map``, joblib ``Parallel`` (backend b2batch) and the
calls ``Executor`` against ``multiprocessing.Pool(2)`` and a raw ``sbatch --array``, measured in the same run.

Every row is a fresh Python process that times one call from before the pool (or backend) is made until it is
shut down (``with`` block left), so start-up and shut-down count, as a user waits for them:

  multiprocessing    ``multiprocessing.Pool(2).map(f, range(N))``: the local reference;
  b2batch Pool       ``b2batch.Pool(batch_system=S).map(f, range(N))``, default chunks;
  b2batch joblib     ``Parallel()(delayed(f)(i) for i in range(N))`` under
                     ``parallel_config(backend="b2batch", batch_system=S)``, default batch size;
  b2batch submit     ``Executor(S).submit(f, i)`` N times, then every ``result()`` (calls packed by the
                     executor; ``--no-submit`` leaves it out);
  pilot floor        (local) ``python -c "import <what a pilot imports>"``: an interpreter with the modules a
                     pilot and a unit of calls need (what a pilot started from its wrapper cannot go below;
                     local pilots forked from the steering process, ``local_start``, start without it);
  import joblib      (local) ``import joblib`` alone: what any joblib call pays before its backend does anything;
  joblib loky        (local) ``Parallel(n_jobs=2)`` with joblib's own default backend: joblib's local reference;
  raw array          (``--parts slurm``) ONE ``sbatch --array=1-N`` of ``echo`` jobs, until squeue lists none
                     of them: what Slurm itself needs for N jobs.

``--parts local`` runs the local rows with ``batch_system="local"``, ``--parts slurm`` the same b2batch rows on
the local Slurm beside the raw array (``--slurm-n``, default N). Rows of a round are interleaved and
``--repeat`` rounds run; the summary gives medians and the ratios (targets of issue 44, must-have 2: within
3x multiprocessing.Pool(2) locally, at most 0.25x the raw array on Slurm). Every row prints the 1-minute load
at its start. Untimed runs (a pilot floor, a Pool and a joblib call of 10 items) come first, so that the bytecode
caches (written under the bench's folder, ``PYTHONPYCACHEPREFIX``) are warm. ``--base DIR`` runs the local
b2batch rows a second time, interleaved, with b2batch from the source tree DIR (an earlier commit's, from ``git
archive``): rows ``pool@base`` and ``joblib@base``, a before and after measured in the same run. Last line: one
JSON line of every figure.
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
import textwrap
import time
from pathlib import Path

MODULE = "def trivial(x):\n    return 2 * x\n"

RUNNER = textwrap.dedent('''
    import json, os, sys, time
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from b2bench_trivial import trivial

    kind, n, system = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    start = time.perf_counter()
    if kind == "multiprocessing":
        import multiprocessing
        with multiprocessing.Pool(2) as pool:
            values = pool.map(trivial, range(n))
    elif kind == "pool":
        import b2batch
        with b2batch.Pool(batch_system=system, verbose=False) as pool:
            values = pool.map(trivial, range(n))
    elif kind == "joblib loky":
        from joblib import Parallel, delayed
        values = Parallel(n_jobs=2)(delayed(trivial)(i) for i in range(n))
    elif kind == "import joblib":
        import joblib
        values = [2 * x for x in range(n)]
    elif kind == "joblib":
        import b2batch.joblib
        from joblib import Parallel, delayed, parallel_config
        with parallel_config(backend="b2batch", batch_system=system):
            values = Parallel()(delayed(trivial)(i) for i in range(n))
    elif kind == "submit":
        from b2batch.calls import Executor
        with Executor(system, name="trivial") as executor:
            futures = [executor.submit(trivial, i) for i in range(n)]
            values = [future.result() for future in futures]
    wall = time.perf_counter() - start
    print(json.dumps({"wall": wall, "ok": values == [2 * x for x in range(n)]}))
''')

#: What a pilot imports before its first unit, and a unit of calls after it (its preloads).
PILOT_IMPORTS = ("import b2batch.engine.pilots.node_worker, b2batch.calls.calls_on_node, "
                 "b2batch.pool.chunk_on_node, cloudpickle")


def log(text: str) -> None:
    print(text, flush=True)


def run_row(folder: Path, kind: str, n: int, system: str, timeout: float, base: str | None = None) -> dict:
    """One row in a fresh Python; ``base``: with b2batch imported from that source tree (an earlier commit's)."""
    # Bytecode caches are written and used (in the bench's folder), as an installed package has them: without
    # them (PYTHONDONTWRITEBYTECODE) every changed module would be compiled again in every row. A base tree has
    # caches of its own.
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
           "PYTHONPYCACHEPREFIX": str(folder / ("pycache-base" if base else "pycache")),
           "PYTHONPATH": os.pathsep.join(p for p in (str(folder), base, os.environ.get("PYTHONPATH")) if p)}
    if kind == "pilot floor":
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", PILOT_IMPORTS], cwd=folder, env=env, capture_output=True,
                              text=True, timeout=timeout)
        return {"wall": time.perf_counter() - start, "ok": done.returncode == 0}
    done = subprocess.run([sys.executable, str(folder / "runner.py"), kind, str(n), system], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        log(done.stderr[-3000:])
        return {"wall": None, "ok": False}
    return json.loads(done.stdout.strip().splitlines()[-1])


def raw_array(folder: Path, n: int, timeout: float) -> dict:
    """One ``sbatch --array=1-N`` of ``echo`` jobs, from the submission until squeue lists none of them."""
    start = time.perf_counter()
    job = subprocess.run(["sbatch", "--parsable", f"--array=1-{n}", "--job-name=b2bench-trivial-raw",
                          "--output=/dev/null", f"--chdir={folder}", "--wrap", "echo x"], check=True,
                         capture_output=True, text=True, timeout=300).stdout.strip().split(";")[0]
    while time.perf_counter() - start < timeout:
        listed = subprocess.run(["squeue", "--noheader", "--array", f"--jobs={job}", "--format=%i"],
                                capture_output=True, text=True, timeout=300).stdout.split()
        if not listed:
            break
        time.sleep(0.5)
    return {"wall": time.perf_counter() - start, "ok": True}


def our_jobs() -> int:
    out = subprocess.run(["squeue", "--noheader", "--me", "--format=%j"], capture_output=True, text=True).stdout
    return len(out.split())


def measure(folder: Path, kind: str, n: int, system: str, timeout: float, base: str | None = None) -> dict:
    if system == "slurm":
        while our_jobs():
            time.sleep(1)
    load = os.getloadavg()[0]
    result = (raw_array(folder, n, timeout) if kind == "raw array"
              else run_row(folder, kind, n, system, timeout, base))
    row = {"kind": f"{kind}@base" if base else kind, "system": system, "n": n, "load": round(load, 2), **result}
    wall = f"{row['wall']:8.3f} s" if row.get("wall") is not None else "  failed"
    log(f"  {system:6s} N={n:<6d} {row['kind']:16s} wall {wall}   values {'ok' if row['ok'] else 'WRONG'}   "
        f"(load {load:.2f})")
    return row


def median_of(rows: list[dict], system: str, kind: str) -> float | None:
    walls = [r["wall"] for r in rows if r["system"] == system and r["kind"] == kind and r.get("wall") and r["ok"]]
    return statistics.median(walls) if walls else None


def summary(rows: list[dict], kinds: list[str]) -> None:
    for system, reference, target in (("local", "multiprocessing", 3.0), ("slurm", "raw array", 0.25)):
        base = median_of(rows, system, reference)
        if base is None:
            continue
        print(f"{system}: medians; ratio to {reference} (target: at most {target:g}x)")
        for kind in kinds:
            value = median_of(rows, system, kind)
            if value is not None:
                print(f"  {kind:16s} {value:8.3f} s   {value / base:7.2f}x")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--slurm-n", type=int, default=None, help="items on Slurm (default: --n)")
    parser.add_argument("--parts", default="local", help="local, slurm or local,slurm (default local)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-submit", action="store_true", help="leave out the Executor.submit row")
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--base", default=None,
                        help="also run the local b2batch rows with b2batch from this source tree (e.g. an earlier "
                             "commit's, from git archive), interleaved: rows '<kind>@base'")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="b2bench-trivial-"))
    (folder / "b2bench_trivial.py").write_text(MODULE)
    (folder / "runner.py").write_text(RUNNER)
    (folder / "settings.json").write_text(json.dumps({"task_file_dir": str(folder / "work"),
                                                      "log_dir": str(folder / "logs")}))
    kinds = ["pool", "joblib"] + ([] if args.no_submit else ["submit"])
    rows: list[dict] = []
    log(f"# trivial calls, N={args.n}; {os.cpu_count()} CPUs; folder {folder}")
    try:
        run_row(folder, "pilot floor", 0, "local", args.timeout)  # warms the bytecode caches
        run_row(folder, "pool", 10, "local", args.timeout)
        run_row(folder, "joblib", 10, "local", args.timeout)
        if args.base:
            run_row(folder, "pool", 10, "local", args.timeout, args.base)
            run_row(folder, "joblib", 10, "local", args.timeout, args.base)
        for round_number in range(args.repeat):
            log(f"round {round_number + 1}")
            if "local" in args.parts:
                for kind in ["multiprocessing", "pilot floor", "import joblib", "joblib loky", *kinds]:
                    rows.append(measure(folder, kind, args.n, "local", args.timeout))
                    if args.base and kind in kinds:
                        rows.append(measure(folder, kind, args.n, "local", args.timeout, args.base))
            if "slurm" in args.parts:
                for kind in ["raw array", *kinds]:
                    rows.append(measure(folder, kind, args.slurm_n or args.n, "slurm", args.timeout))
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    summary(rows, ["pilot floor", "import joblib", "joblib loky",
                   *[label for kind in kinds for label in (kind, f"{kind}@base")]])
    print(json.dumps(rows))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
