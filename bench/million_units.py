#!/usr/bin/env python3
"""The steering process's CPU time per unit and its peak memory for N units through pilot jobs (issue 28).

Rows, each one fresh Python process (``--child``) that measures itself (imports included in the memory,
not in the CPU time, which counts from just before the call to just after it):

  idle python       the RSS of a Python that imported b2batch, joblib and psutil and did nothing (the floor);
  multiprocessing   ``multiprocessing.Pool(2).map(f, range(N))``: the reference for a map of N items;
  pool              ``b2batch.Pool(batch_system=S, settings={"pilot_jobs": P}).map(f, range(N))``;
  joblib            ``Parallel()(delayed(f)(i) for i in range(N))`` under ``parallel_config(backend="b2batch",
                    batch_system=S)`` (its default: pilots);
  farm              ``b2batch farm LIST --batch-system S --jobs P`` of ``--farm-n`` lines of ``true``.

S is ``local`` (``--slurm``: the local Slurm). The steering process's CPU time is its own (user + system, its
threads included, its child processes not: the local batch system's pilots are children and do the units'
work); its RSS is sampled every 50 ms by a thread (psutil) and its peak also read from ``ru_maxrss``. The
RSS growth from a quarter of the run to its end shows memory that grows with the units (a Python object kept
per finished unit). Targets (issue 28): at most 0.1 ms of steering CPU per unit for ``Pool.map``, at most
500 MB peak RSS at 1,000,000 units.

    python3 bench/million_units.py                    # N = 100,000 on local
    python3 bench/million_units.py --million --slurm  # N = 1,000,000 on the local Slurm
    python3 bench/million_units.py --only pool --n 20000

Last line: one JSON line of all figures. Exit status 0 when every row gave the right results.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

KINDS = ("idle", "multiprocessing", "pool", "joblib", "farm")


def trivial(x: int) -> int:
    return 2 * x


class Sampler:
    """This process's RSS every ``interval`` seconds: the peak, and the value when :meth:`mark` is called."""

    def __init__(self, interval: float = 0.05) -> None:
        import psutil

        self.process = psutil.Process()
        self.peak = self.process.memory_info().rss
        self.marks: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, args=(interval,), daemon=True)
        self._thread.start()

    def _loop(self, interval: float) -> None:
        while not self._stop.wait(interval):
            self.peak = max(self.peak, self.process.memory_info().rss)

    def mark(self, name: str) -> None:
        self.marks[name] = self.process.memory_info().rss

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.process.memory_info().rss)

    def cpu(self) -> float:
        times = self.process.cpu_times()
        return times.user + times.system


def child(kind: str, n: int, system: str, pilots: int, work: Path, chunksize: int | None = None) -> dict[str, Any]:
    import joblib  # noqa: F401  (every row pays the same imports)

    import b2batch

    sampler = Sampler()
    quarter = max(1, n // 4)
    ok = True
    cpu0 = sampler.cpu()
    start = time.monotonic()
    if kind == "idle":
        time.sleep(0.5)
    elif kind == "multiprocessing":
        import multiprocessing

        with multiprocessing.Pool(2) as pool:
            values = []
            for i, value in enumerate(pool.imap(trivial, range(n), chunksize=max(1, n // 8))):
                values.append(value)
                if i + 1 == quarter:
                    sampler.mark("quarter")
            ok = values == [2 * x for x in range(n)]
    elif kind == "pool":
        import b2batch

        with b2batch.Pool(batch_system=system, work_dir=work, verbose=False, polling_interval=0.5,
                          settings={"pilot_jobs": pilots}) as pool:
            total = 0
            # map's chunks (pool.map(trivial, range(n)) with its default chunksize), read as they come
            size = chunksize or -(-n // (4 * pool.slots))
            for i, value in enumerate(pool.imap(trivial, range(n), chunksize=size)):
                ok = ok and value == 2 * i
                total += 1
                if total == quarter:
                    sampler.mark("quarter")
            ok = ok and total == n
    elif kind == "joblib":
        from joblib import Parallel, delayed, parallel_config

        import b2batch.joblib

        got = 0
        with parallel_config(backend="b2batch", batch_system=system):
            for i, value in enumerate(Parallel(return_as="generator")(delayed(trivial)(i) for i in range(n))):
                ok = ok and value == 2 * i
                got += 1
                if got == quarter:
                    sampler.mark("quarter")
        ok = ok and got == n
    elif kind == "farm":
        tasklist = work / "lines.txt"
        tasklist.write_text("true\n" * n)
        marker = threading.Thread(target=_mark_farm, args=(sampler, tasklist, quarter), daemon=True)
        marker.start()
        from b2batch.farm.cli import main as farm_main

        code = farm_main([str(tasklist), "--batch-system", system, "--jobs", str(pilots), "--proc", "1"])
        ok = code == 0
    cpu = sampler.cpu() - cpu0
    wall = time.monotonic() - start
    sampler.mark("end")
    sampler.stop()
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"kind": kind, "n": n, "ok": ok, "wall": wall, "cpu": cpu, "peak_rss": max(sampler.peak, maxrss),
            "rss_quarter": sampler.marks.get("quarter"), "rss_end": sampler.marks.get("end")}


def _mark_farm(sampler: Sampler, tasklist: Path, quarter: int) -> None:
    """Mark the RSS once a quarter of the farm's lines are done (its work dir's ``finished`` list)."""
    finished = Path(f"{tasklist}_workdir") / "finished"
    while True:
        try:
            with open(finished, "rb") as f:
                if sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b"")) >= quarter:
                    sampler.mark("quarter")
                    return
        except OSError:
            pass
        time.sleep(0.5)


def row(kind: str, n: int, system: str, pilots: int, folder: Path, timeout: float,
        chunksize: int | None) -> dict[str, Any]:
    work = folder / kind
    work.mkdir()
    done = subprocess.run([sys.executable, __file__, "--child", kind, "--n", str(n), "--system", system,
                           "--pilots", str(pilots), "--work", str(work),
                           *(["--chunksize", str(chunksize)] if chunksize else [])], cwd=work, capture_output=True, text=True,
                          timeout=timeout)
    if done.returncode != 0 or not done.stdout.strip():
        print(done.stderr[-3000:], file=sys.stderr)
        return {"kind": kind, "n": n, "ok": False}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--million", action="store_true", help="N = 1,000,000")
    parser.add_argument("--farm-n", type=int, default=None, help="lines of the farm (default: N)")
    parser.add_argument("--slurm", action="store_true", help="pilots on the local Slurm (default: local)")
    parser.add_argument("--pilots", type=int, default=2)
    parser.add_argument("--chunksize", type=int, default=None,
                        help="items per unit of the pool (default: Pool.map's, N / (4 x slots))")
    parser.add_argument("--only", nargs="+", choices=KINDS, default=list(KINDS))
    parser.add_argument("--timeout", type=float, default=7200)
    parser.add_argument("--child", choices=KINDS, help=argparse.SUPPRESS)
    parser.add_argument("--system", default="local", help=argparse.SUPPRESS)
    parser.add_argument("--work", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.n, args.system, args.pilots, Path(args.work), args.chunksize)))
        return 0
    n = 1_000_000 if args.million else args.n
    system = "slurm" if args.slurm else "local"
    folder = Path(tempfile.mkdtemp(prefix="b2bench-million-"))
    rows, ok = [], True
    try:
        for kind in args.only:
            units = args.farm_n if kind == "farm" and args.farm_n else n
            result = row(kind, units, system, args.pilots, folder, args.timeout, args.chunksize)
            rows.append(result)
            ok = ok and result.get("ok", False)
            if "cpu" not in result:
                print(f"{kind:<16} FAILED", flush=True)
                continue
            growth = ((result["rss_end"] - result["rss_quarter"]) / 2**20 if result.get("rss_quarter") else
                      float("nan"))
            print(f"{kind:<16} N={units:>9,}  wall {result['wall']:7.1f} s  steering CPU {result['cpu']:7.2f} s = "
                  f"{1000 * result['cpu'] / units:7.4f} ms/unit  peak RSS {result['peak_rss'] / 2**20:7.1f} MB  "
                  f"RSS growth 1/4 -> end {growth:+7.1f} MB", flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(json.dumps({"system": system, "rows": rows}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
