#!/usr/bin/env python3
"""The steering process's CPU time per unit and its peak memory for N units through pilot jobs (issue 28).

Rows, each one fresh Python process (``--child``) that measures itself (imports included in the memory,
not in the CPU time, which counts from just before the call to just after it):

  idle python       the RSS of a Python that imported b2batch, joblib and psutil and did nothing (the floor);
  multiprocessing   ``multiprocessing.Pool(2).map(f, range(N))``: the reference for a map of N items;
  pool              ``b2batch.Pool(batch_system=S, settings={"pilot_jobs": P}).map(f, range(N))``;
  joblib            ``Parallel()(delayed(f)(i) for i in range(N))`` under ``parallel_config(backend="b2batch",
                    batch_system=S)`` (its default: pilots);
  farm              ``b2batch farm LIST --batch-system S --jobs P`` of ``--farm-n`` lines of ``true``;
  percall           the cost of one trivial call inside a pilot: ``b2batch.Pool(...).imap(f, range(M),
                    chunksize=1)`` with M = ``--per-call-n`` (default 1,000), one unit per call. Each call
                    notes the time and the CPU time so far of its pilot's worker (with the children it reaped)
                    and of the process that runs it; per worker, the interval from its first call to its last
                    over the calls in between is the time per call (claim, hand over, load and run the call,
                    write its result and exit code, hand back), likewise the CPU. Target (issue 28): at most
                    1 ms per trivial call. The steering process queues the calls while the pilots run
                    them: on 2 shared cores its own cost per unit can bound the time per call;
  floor             the pilot alone: ONE worker process (``python -m b2batch.engine.pilots.node_worker``) serving a work
                    queue into which M trivial calls (``operator.mul``, each a unit run by ``b2batch.calls.calls_on_node``
                    as a Pool's or joblib's call is) were put before it started; its
                    wall and CPU time (with its children) per unit: claim, hand over,
                    run, exit code, usage and log, hand back, with no steering process to wait for; less the
                    same worker serving one unit (its start-up, the imports of the first unit), over M - 1.
                    Its "steering CPU" is the CPU of putting the units into the queue.

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
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

KINDS = ("idle", "multiprocessing", "pool", "joblib", "farm", "percall", "floor")


def trivial(x: int) -> int:
    return 2 * x


def stamped(x: int) -> tuple[int, float, str, float]:
    """A trivial call that notes when and where it ran, and the CPU time so far of its pilot's worker (with its
    reaped children) and of the process that runs it."""
    import os
    import time

    def cpu(pid: int) -> float:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
        return sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")

    own = os.times()
    return 2 * x, time.time(), str(os.getppid()), cpu(os.getppid()) + own.user + own.system + own.children_user + \
        own.children_system


def worker_floor(n: int, work: Path) -> dict[str, Any]:
    """One worker process serving ``n`` trivial call units queued before it started, less one serving 1 unit
    (its start-up): wall and CPU per unit."""
    one, many = _serve_queue(1, work / "one"), _serve_queue(n, work / "many")
    return {"runners": 1, "calls_per_runner": [n], "s_per_call": (many["wall"] - one["wall"]) / max(1, n - 1),
            "cpu_per_call": (many["cpu"] - one["cpu"]) / max(1, n - 1), "ok": one["ok"] and many["ok"],
            "startup_wall": one["wall"], "startup_cpu": one["cpu"]}


def _serve_queue(n: int, work: Path) -> dict[str, Any]:
    import operator
    import os

    import cloudpickle

    from b2batch.engine.pilots.work_queue import WorkQueue

    queue = WorkQueue(work / "queue")
    queue.create()
    for i in range(n):
        folder = work / "units" / f"u{i:07d}"
        folder.mkdir(parents=True)
        (folder / "call.pkl").write_bytes(cloudpickle.dumps([(operator.mul, (2, i), {})]))
        unit = {"call": "b2batch.calls.calls_on_node:run_calls", "args": [str(folder / "call.pkl"), str(folder / "result.pkl"),
                                                                 [], False, str(work)]}
        queue.put(f"u{i:07d}", {"key": f"u{i}", "name": f"u{i}", "unit": unit,
                                "files": {"exit_code": str(folder / "exit_code"), "stdout": str(folder / "stdout"),
                                          "stderr": str(folder / "stderr")}})
    spec = work / "worker.json"
    spec.write_text(json.dumps({"worker": {"queue": str(queue.root), "idle_timeout": 0, "heartbeat_timeout": 60,
                                           "worker": "floor"}}))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    subprocess.run([sys.executable, "-m", "b2batch.engine.pilots.node_worker", str(spec)], check=True, env=dict(os.environ),
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = sum(1 for i in range(n) if (work / "units" / f"u{i:07d}" / "exit_code").read_text() == "0\n")
    return {"wall": wall, "cpu": after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, "ok": done == n}


def per_runner(stamps: list[tuple[float, str, float]]) -> dict[str, Any]:
    """Time and CPU per call of each pilot worker, from the stamps of the calls it ran."""
    by_runner: dict[str, list[tuple[float, float]]] = {}
    for when, runner, cpu in stamps:
        by_runner.setdefault(runner, []).append((when, cpu))
    span = cpu_span = 0.0
    intervals = 0
    for runs in by_runner.values():
        runs.sort()
        if len(runs) > 1:
            span += runs[-1][0] - runs[0][0]
            cpu_span += runs[-1][1] - runs[0][1]
            intervals += len(runs) - 1
    return {"runners": len(by_runner), "calls_per_runner": sorted((len(r) for r in by_runner.values()), reverse=True),
            "s_per_call": span / intervals if intervals else None,
            "cpu_per_call": cpu_span / intervals if intervals else None}


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
    inside: dict[str, Any] = {}
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
    elif kind == "percall":
        import b2batch

        stamps = []
        with b2batch.Pool(batch_system=system, work_dir=work, verbose=False, polling_interval=0.5,
                          settings={"pilot_jobs": pilots}) as pool:
            for i, (value, when, runner, used) in enumerate(pool.imap(stamped, range(n), chunksize=1)):
                ok = ok and value == 2 * i
                stamps.append((when, runner, used))
                if i + 1 == quarter:
                    sampler.mark("quarter")
            ok = ok and len(stamps) == n
        inside = per_runner(stamps)
    elif kind == "floor":
        inside = worker_floor(n, work)
        ok = inside["ok"]
    elif kind == "farm":
        tasklist = work / "lines.txt"
        tasklist.write_text("true\n" * n)
        marker = threading.Thread(target=_mark_farm, args=(sampler, tasklist, quarter), daemon=True)
        marker.start()
        from b2batch.farm.command_line import main as farm_main

        code = farm_main([str(tasklist), "--batch-system", system, "--jobs", str(pilots), "--proc", "1"])
        ok = code == 0
    cpu = sampler.cpu() - cpu0
    wall = time.monotonic() - start
    sampler.mark("end")
    sampler.stop()
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"kind": kind, "n": n, "ok": ok, "wall": wall, "cpu": cpu, "peak_rss": max(sampler.peak, maxrss),
            "rss_quarter": sampler.marks.get("quarter"), "rss_end": sampler.marks.get("end"),
            **({"inside": inside} if inside else {})}


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
        chunksize: int | None, base: str | None = None) -> dict[str, Any]:
    """One row in a child process (in a fresh folder); ``base``: with b2batch imported from that source tree."""
    work = Path(tempfile.mkdtemp(prefix=f"{kind}-", dir=folder))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [base, os.environ.get("PYTHONPATH")]))} \
        if base else None
    done = subprocess.run([sys.executable, __file__, "--child", kind, "--n", str(n), "--system", system,
                           "--pilots", str(pilots), "--work", str(work),
                           *(["--chunksize", str(chunksize)] if chunksize else [])], cwd=work, capture_output=True, text=True,
                          timeout=timeout, env=env)
    shutil.rmtree(work, ignore_errors=True)
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
    parser.add_argument("--per-call-n", type=int, default=1000,
                        help="calls of the percall row, one unit each (default 1000)")
    parser.add_argument("--only", nargs="+", choices=KINDS, default=list(KINDS))
    parser.add_argument("--timeout", type=float, default=7200)
    parser.add_argument("--repeat", type=int, default=1, help="rounds (the rows of a round interleaved); medians "
                        "are printed at the end")
    parser.add_argument("--base", default=None, help="also run each row with b2batch from this source tree (e.g. "
                        "`git archive <commit> | tar -x -C DIR`), interleaved: before and after in one sitting")
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
    sides = [None, args.base] if args.base else [None]
    per_unit: dict[str, list[float]] = {}
    try:
        for kind, side in ((kind, side) for _round in range(args.repeat) for kind in args.only for side in sides):
            units = (args.farm_n if kind == "farm" and args.farm_n else args.per_call_n
                     if kind in ("percall", "floor") else n)
            label = f"{kind}@base" if side else kind
            result = row(kind, units, system, args.pilots, folder, args.timeout, args.chunksize, side)
            result["label"] = label
            rows.append(result)
            ok = ok and result.get("ok", False)
            if "cpu" not in result:
                print(f"{label:<16} FAILED", flush=True)
                continue
            per_unit.setdefault(label, []).append(1000 * result["cpu"] / units)
            growth = ((result["rss_end"] - result["rss_quarter"]) / 2**20 if result.get("rss_quarter") else
                      float("nan"))
            print(f"{label:<16} N={units:>9,}  wall {result['wall']:7.1f} s  steering CPU {result['cpu']:7.2f} s = "
                  f"{1000 * result['cpu'] / units:7.4f} ms/unit  peak RSS {result['peak_rss'] / 2**20:7.1f} MB  "
                  f"RSS growth 1/4 -> end {growth:+7.1f} MB", flush=True)
            if kind in ("percall", "floor"):
                inside = result["inside"]
                per_call = inside["s_per_call"]
                where = "inside a pilot" if kind == "percall" else "in one worker, queued before it started"
                print(f"{'':<16} per trivial call {where} ({inside['runners']} worker(s), calls each "
                      f"{inside['calls_per_runner']}): {1000 * (per_call or 0):.2f} ms (CPU "
                      f"{1000 * (inside['cpu_per_call'] or 0):.2f} ms); target at most 1 ms: "
                      f"{'met' if per_call is not None and per_call <= 0.001 else 'NOT met'}", flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if args.repeat > 1 or args.base:
        for label, values in per_unit.items():
            line = f"median {label:<16} steering CPU {statistics.median(values):.4f} ms/unit over {len(values)} run(s)"
            before = per_unit.get(f"{label}@base")
            if before:
                line += f"; / base {statistics.median(values) / statistics.median(before):.2f}"
            print(line, flush=True)
    print(json.dumps({"system": system, "rows": rows}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
