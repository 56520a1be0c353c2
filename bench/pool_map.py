#!/usr/bin/env python3
"""``Pool.map`` of a trivial function on the local Slurm: b2batch.Pool against pypoolparty's
``slurm.array.Pool`` (the real one, from PyPI) and ``multiprocessing.Pool(2)``, in the same run.

For each N of ``--n`` (default 1,000 and 10,000) three rows, each the wall time of one ``map`` call in a
fresh subprocess (imports and pool set-up included):

  pypoolparty      ``pypoolparty.slurm.array.Pool(polling_interval=P).map(f, range(N))``: one array element
                   per item (the reference);
  b2batch          ``b2batch.Pool(batch_system="slurm", polling_interval=P).map(f, range(N))`` with its
                   default chunks (at most 4 x 50 jobs without a throttle);
  multiprocessing  ``multiprocessing.Pool(2).map(f, range(N))`` on this machine.

  raw-array        (with ``--raw-array``) ONE ``sbatch --array=1-N`` of N ``echo`` jobs, until squeue lists none
                   of them: what Slurm itself needs for N jobs (issue 39's reference: b2batch's default
                   settings, job_shape auto, at most 0.25x its wall).

``f`` lives in a module of the bench folder (pypoolparty imports the function by name on the node). Each
row also gives the most files and folders its work dir held while the map ran (sampled every 0.2 s) and at
the end (``keep_work_dir=True``). The Slurm queue is checked empty of the bench's jobs before each row;
``--skip-pypoolparty-above N`` leaves the reference out for larger N (it runs one job per item). Last line:
one JSON line of all figures. Target (issue 18): b2batch's wall time at most 1.0x pypoolparty's, its work
dir's file count independent of N.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

MODULE = textwrap.dedent('''
    def trivial(x):
        return 2 * x
''')

RUNNER = textwrap.dedent('''
    import json, os, sys, threading, time
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import b2bench_pool_tasks as tasks

    kind, n, work, interval = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
    most = [0]
    stop = threading.Event()

    def count():
        total = 0
        for _root, dirs, files in os.walk(work):
            total += len(dirs) + len(files)
        return total

    def sample():
        while not stop.wait(0.2):
            most[0] = max(most[0], count())

    threading.Thread(target=sample, daemon=True).start()
    start = time.time()
    if kind == "pypoolparty":
        import pypoolparty
        pool = pypoolparty.slurm.array.Pool(polling_interval=interval, work_dir=work, keep_work_dir=True)
        values = pool.map(tasks.trivial, list(range(n)))
    elif kind == "b2batch":
        import b2batch
        with b2batch.Pool(batch_system="slurm", polling_interval=interval or None, work_dir=work, keep_work_dir=True,
                          verbose=False) as pool:
            values = pool.map(tasks.trivial, range(n))
    else:
        import multiprocessing
        with multiprocessing.Pool(2) as pool:
            values = pool.map(tasks.trivial, range(n))
    wall = time.time() - start
    stop.set()
    print(json.dumps({"wall": wall, "ok": values == [2 * x for x in range(n)], "files_max": max(most[0], count()),
                      "files_end": count()}))
''')


def bench_jobs(user: str) -> int:
    out = subprocess.run(["squeue", "--noheader", f"--user={user}", "--format=%j"], capture_output=True,
                         text=True).stdout.split()
    return sum(1 for name in out if name.startswith(("pool.b2b", "20", "b2bench-raw", "map_")))  # ours, pypoolparty's


def raw_array(folder: Path, n: int, timeout: float) -> dict:
    """One ``sbatch --array=1-N`` of ``echo`` jobs, timed from the submission until squeue lists none of them."""
    start = time.time()
    job = subprocess.run(["sbatch", "--parsable", f"--array=1-{n}", "--job-name=b2bench-raw", "--output=/dev/null",
                          f"--chdir={folder}", "--wrap", "echo x"], check=True, capture_output=True, text=True,
                         timeout=120).stdout.strip().split(";")[0]
    while time.time() - start < timeout:
        listed = subprocess.run(["squeue", "--noheader", "--array", f"--jobs={job}", "--format=%i"],
                                capture_output=True, text=True, timeout=120).stdout.split()
        if not listed:
            break
        time.sleep(0.2)
    return {"kind": "raw-array", "n": n, "wall": time.time() - start, "ok": True}


def row(folder: Path, kind: str, n: int, interval: float, timeout: float) -> dict:
    if kind == "raw-array":
        return raw_array(folder, n, timeout)
    work = folder / f"{kind}-{n}"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": f"{folder}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run([sys.executable, str(folder / "runner.py"), kind, str(n), str(work), str(interval)],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        print(done.stderr[-3000:], file=sys.stderr)
        return {"kind": kind, "n": n, "ok": False}
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    return {"kind": kind, "n": n, **figures}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--polling-interval", type=float, default=1.0,
                        help="the same for both pools (0: b2batch's default settings, poll_interval to max_poll_interval)")
    parser.add_argument("--skip-pypoolparty-above", type=int, default=None)
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--raw-array", action="store_true", help="also a raw sbatch --array of N echo jobs")
    parser.add_argument("--no-pypoolparty", action="store_true", help="leave pypoolparty's row out")
    args = parser.parse_args()
    try:
        if not args.no_pypoolparty:
            import pypoolparty  # noqa: F401
    except ImportError:
        print("pypoolparty is not installed: pip install pypoolparty==0.3.1", file=sys.stderr)
        return 1
    folder = Path(tempfile.mkdtemp(prefix="b2bench-pool-"))
    (folder / "b2bench_pool_tasks.py").write_text(MODULE)
    (folder / "runner.py").write_text(RUNNER)
    rows, ok = [], True
    user = os.environ.get("USER") or subprocess.run(["id", "-un"], capture_output=True, text=True).stdout.strip()
    try:
        for n in args.n:
            kinds = ["pypoolparty", "b2batch", "multiprocessing"] + (["raw-array"] if args.raw_array else [])
            if args.no_pypoolparty or (args.skip_pypoolparty_above is not None and n > args.skip_pypoolparty_above):
                kinds.remove("pypoolparty")
            for kind in kinds:
                while bench_jobs(user):
                    time.sleep(1)
                load = os.getloadavg()[0]
                result = row(folder, kind, n, args.polling_interval, args.timeout)
                result["load"] = round(load, 2)
                rows.append(result)
                ok = ok and result.get("ok", False)
                print(f"N={n:>6} {kind:<16} wall {result.get('wall', float('nan')):8.1f} s  work dir files: "
                      f"max {result.get('files_max', '-')}, end {result.get('files_end', '-')}  (load {load:.2f})",
                      flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    print("\nratios against pypoolparty.slurm.array.Pool (wall time):")
    for n in args.n:
        by_kind = {r["kind"]: r for r in rows if r["n"] == n and r.get("wall")}
        reference = by_kind.get("pypoolparty")
        for kind in ("b2batch", "multiprocessing"):
            if reference and kind in by_kind:
                print(f"  N={n:>6} {kind:<16} {by_kind[kind]['wall'] / reference['wall']:.2f}x")
    if args.raw_array:
        print("\nratios against one raw sbatch --array of N echo jobs (wall time; target for b2batch <= 0.25x):")
        for n in args.n:
            by_kind = {r["kind"]: r for r in rows if r["n"] == n and r.get("wall")}
            for kind in ("b2batch", "multiprocessing"):
                if "raw-array" in by_kind and kind in by_kind:
                    print(f"  N={n:>6} {kind:<16} {by_kind[kind]['wall'] / by_kind['raw-array']['wall']:.2f}x")
    print(json.dumps({"rows": rows, "polling_interval": args.polling_interval}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
