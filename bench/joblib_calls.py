#!/usr/bin/env python3
"""The joblib backend on the local Slurm against joblib's ``loky`` backend (``n_jobs=2``) on the same machine,
measured in the same run.

Workloads: ``--n`` calls (default 1,000) of a trivial function (``x * x``) and of a 0.1 s function
(``time.sleep(--seconds)``). Rows, each a fresh ``Parallel`` call in this process, in this order:

  loky n_jobs=2            the reference (its worker processes started before the first timed call);
  b2batch default n_jobs=2  the default (job_shape auto: joblib's window of 2 units goes to 2 pilots after
                            2 probes, calls packed into units of ~0.5 s) with loky's parallelism;
  b2batch default n_jobs=-1 the default as users write it (the rule sizes pilots to the backlog, at most 100);
  b2batch one job per call ``pilot_jobs=0, batch_size=1``: every call a Slurm job of its own (joblib-htcondor's
                           way); only for the trivial function unless ``--per-call-sleep``, which takes about
                           N x 1 s / Slurm's slots.

Each row: wall time of the ``Parallel`` call, its ratio to loky's, and the overhead per call: (wall time minus
the ideal, N x seconds / parallelism) / N. The local Slurm's node advertises 8 CPUs on a 2-core machine, so
n_jobs=-1 may run more sleeping calls at once than loky's 2 workers. Slurm polls at ``--poll-interval``. Each row
notes the load and the number of other jobs in Slurm's queue at its start: others' jobs take the slots the
pilots wait for.

Exit status 0 when every row ran and gave the right values. ``--keep`` keeps the temporary folder.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from joblib import Parallel, delayed, parallel_config

import b2batch
import b2batch.joblib  # noqa: F401  (registers the backend)


def trivial(x: int) -> int:
    return x * x


def sleepy(x: int, seconds: float) -> int:
    time.sleep(seconds)
    return x * x


def others_jobs() -> int:
    """Jobs in Slurm's queue that are not this benchmark's (they take slots from it)."""
    try:
        out = subprocess.run(["squeue", "-h", "-o", "%j"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return -1
    return sum(1 for name in out.split() if not name.startswith(("sleepy", "trivial", "pilot")))


def timed(label: str, run, n: int, seconds: float, parallelism: int, reference: float | None) -> dict:
    others, load = others_jobs(), os.getloadavg()[0]
    begin = time.perf_counter()
    values = run()
    wall = time.perf_counter() - begin
    ok = values == [i * i for i in range(n)]
    ideal = n * seconds / parallelism
    row = {"row": label, "n": n, "seconds": seconds, "wall": round(wall, 2), "ok": ok,
           "overhead_ms_per_call": round((wall - ideal) / n * 1000, 2),
           "ratio_to_loky": round(wall / reference, 2) if reference else None, "others_jobs": others,
           "load": round(load, 2)}
    ratio = f"{row['ratio_to_loky']:6.2f}x loky" if reference else "  (reference)"
    print(f"  {label:<28} N={n:<6} wall {wall:7.2f} s  {ratio}   overhead {row['overhead_ms_per_call']:8.2f} "
          f"ms/call   values {'ok' if ok else 'WRONG'}   (at start: others' jobs {others}, load {load:.2f})", flush=True)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=0.1)
    parser.add_argument("--system", default="slurm")
    parser.add_argument("--poll-interval", type=float, default=1.0)
    parser.add_argument("--per-call-sleep", action="store_true", help="also one job per call for the 0.1 s calls")
    parser.add_argument("--skip-per-call", action="store_true", help="no one-job-per-call rows (~8 min at N=1000)")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="b2bench-joblib-"))
    os.chdir(folder)
    for name in ("task_file_dir", "log_dir"):  # relative ones would go beside this script
        b2batch.set_setting(name, str(folder / name))
    b2batch.set_setting("poll_interval", args.poll_interval)
    b2batch.set_setting("max_poll_interval", max(args.poll_interval, 5.0))
    print(f"# joblib calls: b2batch on {args.system} vs loky n_jobs=2; load {os.getloadavg()[0]:.2f}; "
          f"folder {folder}", flush=True)
    rows = []
    n = args.n
    Parallel(n_jobs=2, backend="loky")(delayed(trivial)(i) for i in range(4))  # start loky's workers
    for name, function, seconds in (("trivial", trivial, 0.0), (f"{args.seconds:g} s", sleepy, args.seconds)):
        extra = (args.seconds,) if function is sleepy else ()
        print(f"## {name} function", flush=True)
        calls = [delayed(function)(i, *extra) for i in range(n)]
        loky = timed("loky n_jobs=2", lambda: Parallel(n_jobs=2, backend="loky")(calls), n, seconds, 2, None)
        rows.append(loky)
        reference = loky["wall"]
        for label, config, parallelism in (
                ("b2batch default n_jobs=2", {"n_jobs": 2}, 2),
                ("b2batch default n_jobs=-1", {"n_jobs": -1}, 8),
                ("b2batch one job per call", {"n_jobs": -1, "pilot_jobs": 0, "batch_size": 1}, 8)):
            if "pilot_jobs" in config and (args.skip_per_call or (function is sleepy and not args.per_call_sleep)):
                continue
            with parallel_config(backend="b2batch", batch_system=args.system, **config):
                rows.append(timed(label, lambda: Parallel()(calls), n, seconds, parallelism, reference))
    print("JSON " + json.dumps(rows))
    if not args.keep:
        os.chdir("/")
        shutil.rmtree(folder, ignore_errors=True)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
