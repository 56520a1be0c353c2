#!/usr/bin/env python3
"""``b2batch farm`` against the real PyTaskFarmer, ``xargs -P`` and a raw Slurm job array, in the same run.

Two task lists, each measured in a fresh folder (all removed when the bench ends, none between rows):

- ``--n-true`` lines of ``true`` (default 10,000): the cost per line of the farm itself;
- ``--n-sleep`` lines of ``sleep 0.1`` (default 1,000): lines that take some time.

Local part (``--parts local``), ``--proc`` processes each (default 2), the rows of a round interleaved:

  xargs          ``xargs -d '\\n' -P 2 -n 1 sh -c < list``: every line by a shell, nothing recorded;
  b2batch farm   ``python -m b2batch farm list --proc 2``, the ``b2batch farm`` users type (work dir, per-line
                 logs, timeline);
  PyTaskFarmer   the real ``pytaskfarmer.py list --proc 2`` (``--pytaskfarmer PATH``; default the one on PATH
                 if it is PyTaskFarmer's, e.g. ``pip install PyTaskFarmer==0.1.0`` in a venv of its own, as its
                 script has the name of b2batch's compatible one). It rewrites ``toprocess`` for every line:
                 ``--ptf-timeout`` (default 900 s) ends a run that takes longer (reported as such).

Slurm part (``--parts slurm``, the local Slurm of tests/clusters): ``--slurm-n`` lines of each list (default
1,000: Slurm's default MaxArraySize is 1001):

  raw array      ONE ``sbatch --array=1-N`` whose element k runs line k by ``sh -c``; done when the array left
                 the queue (slurm_throughput.py's Cluster helper polls squeue);
  b2batch farm   ``b2batch farm list --batch-system slurm --jobs 2 --proc 1`` (two pilot jobs of one process:
                 the same two cores).

Output: one line per measurement and the ratios against the reference measured in the same round (targets of
issue 19: b2batch within 1.2x of xargs -P 2, faster than PyTaskFarmer), then one JSON line with every figure.
The machine is shared: each line gives the 1-minute load at its start; use ``--repeat`` and the median.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from slurm_throughput import Cluster, log


def write_lists(folder: Path, n_true: int, n_sleep: int) -> dict[str, Path]:
    lists = {"true": folder / "true.txt", "sleep 0.1": folder / "sleep.txt"}
    lists["true"].write_text("true\n" * n_true)
    lists["sleep 0.1"].write_text("sleep 0.1\n" * n_sleep)
    return lists


def children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


#: CPU seconds (user + system) of the last command ``timed`` ran, with its children (the farm's lines, xargs's shells).
LAST_CPU = [0.0]


#: The measured commands' environment: bytecode caches written under the bench's folder (this sandbox sets
#: PYTHONDONTWRITEBYTECODE, which would compile every changed module again at every farm start; an installed
#: b2batch has its caches), warmed by an untimed farm run of one line before the rounds.
ENV: dict[str, str] = {}


def timed(command: list[str], cwd: Path, timeout: float, stdin: Path | None = None) -> tuple[float | None, int]:
    """Wall time of ``command`` (None when it ran out of time) and its exit code; its CPU time in LAST_CPU."""
    cpu = children_cpu()
    start = time.perf_counter()
    with open(stdin or os.devnull, "rb") as source, open(cwd / "output.log", "ab") as out:
        child = subprocess.Popen(command, cwd=cwd, stdin=source, stdout=out, stderr=subprocess.STDOUT, env=ENV or None)
        try:
            code = child.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
            return None, -9
    LAST_CPU[0] = children_cpu() - cpu
    return time.perf_counter() - start, code


def file_creation_ms(folder: Path, count: int = 300) -> float:
    """Kernel and user CPU milliseconds per new file in ``folder`` (``count`` empty files made and removed). The
    farm makes a log file per line: on this machine's ext4 a new file has cost 0.02 ms at most times and 0.5-0.7
    ms at others (under /tmp, for minutes at a time), which moves the farm's ratio to xargs by 0.4."""
    probe = folder / f"probe-{uuid.uuid4().hex[:6]}"
    probe.mkdir()
    before = resource.getrusage(resource.RUSAGE_SELF)
    for i in range(count):
        os.close(os.open(probe / f"f{i}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    after = resource.getrusage(resource.RUSAGE_SELF)
    shutil.rmtree(probe, ignore_errors=True)
    return 1000 * (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) / count


def fresh(base: Path, name: str, source: Path) -> tuple[Path, Path]:
    folder = base / f"{name}-{uuid.uuid4().hex[:6]}"
    folder.mkdir()
    target = folder / source.name
    shutil.copy(source, target)
    return folder, target


def real_pytaskfarmer(given: str | None) -> str | None:
    path = given or shutil.which("pytaskfarmer.py")
    if path is None:
        return None
    text = Path(path).read_text(errors="replace")
    if "pytaskfarmer_main" in text or "from b2batch" in text or "import b2batch" in text:  # not a path's name
        log(f"{path} is b2batch's compatible script, not PyTaskFarmer: give --pytaskfarmer")
        return None
    return path


def local_round(args: argparse.Namespace, base: Path, lists: dict[str, Path], ptf: str | None) -> dict:
    results: dict[str, dict[str, float | None]] = {}
    for what, source in lists.items():
        row: dict[str, float | None] = {}
        runners = {
            "xargs": lambda folder, path: (["xargs", "-d", "\n", "-P", str(args.proc), "-n", "1", "sh", "-c"], path),
            "b2batch": lambda folder, path: ([sys.executable, "-m", "b2batch", "farm", path.name, "--proc",
                                              str(args.proc)], None),
        }
        if ptf:
            runners["pytaskfarmer"] = lambda folder, path: ([sys.executable if ptf.endswith(".py") and not os.access(
                ptf, os.X_OK) else ptf, *([ptf] if not os.access(ptf, os.X_OK) else []), path.name, "--proc",
                str(args.proc)], None)
        for name, make in runners.items():
            folder, path = fresh(base, f"{name}-{what.split()[0]}", source)
            command, stdin = make(folder, path)
            load = os.getloadavg()[0]
            timeout = args.ptf_timeout if name == "pytaskfarmer" else args.timeout
            wall, code = timed(command, folder, timeout, stdin)
            ok = code == 0
            if name != "xargs":
                finished = folder / f"{path.name}_workdir" / "finished"
                ok = ok and finished.exists() and finished.read_bytes().count(b"\n") == len(
                    source.read_text().splitlines())
            row[name] = wall if ok else None
            row[f"{name} cpu"] = LAST_CPU[0] if ok else None
            shown = f"{wall:8.2f} s" if wall is not None else f"  > {timeout:g} s (stopped)"
            log(f"  {what:10s} x{len(source.read_text().splitlines()):<6d} {name:13s} {shown}   CPU {LAST_CPU[0]:6.2f} s   "
                f"exit {code}, complete {ok}   (load {load:.2f})")
            # The row's folder stays until the bench ends (main removes them all): deleting its ~2,000 log files
            # right after the row made the next row pay for it (ext4 mounted with discard), as in local_runs.py.
            os.sync()
        results[what] = row
    return results


def slurm_round(args: argparse.Namespace, base: Path, lists: dict[str, Path], cluster: Cluster) -> dict:
    results: dict[str, dict[str, float | None]] = {}
    for what, source in lists.items():
        lines = source.read_text().splitlines()[:args.slurm_n]
        row: dict[str, float | None] = {}
        # raw array: element k runs line k
        folder = base / f"raw-{what.split()[0]}-{uuid.uuid4().hex[:6]}"
        folder.mkdir()
        (folder / "list.txt").write_text("\n".join(lines) + "\n")
        dispatch = folder / "dispatch.sh"
        dispatch.write_text(f'#!/bin/sh\nexec sh -c "$(sed -n "${{SLURM_ARRAY_TASK_ID}}p" '
                            f'{shlex.quote(str(folder / "list.txt"))})"\n')
        dispatch.chmod(0o755)
        cluster.wait_until_free(600)
        load = os.getloadavg()[0]
        start = time.perf_counter()
        done = subprocess.run(["sbatch", "--parsable", f"--array=1-{len(lines)}", f"--job-name={cluster.prefix}.raw",
                               f"--output={folder}/slurm-%A_%a.out", f"--chdir={folder}", str(dispatch)],
                              capture_output=True, text=True, timeout=120, check=False)
        array_id = done.stdout.strip().split(";")[0]
        while any(job[0] == array_id for job in cluster.live_jobs()):
            time.sleep(0.5)
        row["raw array"] = time.perf_counter() - start
        log(f"  slurm {what:10s} x{len(lines):<5d} raw array     {row['raw array']:8.2f} s   (load {load:.2f})")
        # b2batch farm with two pilots
        folder, path = fresh(base, f"farm-{what.split()[0]}", source)
        path.write_text("\n".join(lines) + "\n")
        (folder / "settings.json").write_text(json.dumps({"job_name": cluster.prefix}))
        cluster.wait_until_free(600)
        load = os.getloadavg()[0]
        wall, code = timed([sys.executable, "-m", "b2batch", "farm", path.name, "--batch-system", "slurm", "--jobs",
                            "2", "--proc", "1"], folder, args.timeout)
        finished = folder / f"{path.name}_workdir" / "finished"
        ok = code == 0 and finished.exists() and finished.read_bytes().count(b"\n") == len(lines)
        row["b2batch"] = wall if ok else None
        log(f"  slurm {what:10s} x{len(lines):<5d} b2batch farm  {wall or -1:8.2f} s   exit {code}, complete {ok}   "
            f"(load {load:.2f})")
        results[what] = row
    return results


def ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a and b else "-"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n-true", type=int, default=10_000)
    parser.add_argument("--n-sleep", type=int, default=1_000)
    parser.add_argument("--proc", type=int, default=2)
    parser.add_argument("--parts", default="local,slurm", help="local, slurm or both (default)")
    parser.add_argument("--slurm-n", type=int, default=1000, help="lines of each list on Slurm (default 1000)")
    parser.add_argument("--repeat", type=int, default=1, help="rounds of the local part (default 1)")
    parser.add_argument("--pytaskfarmer", default=None, help="the real pytaskfarmer.py (default: on PATH)")
    parser.add_argument("--ptf-timeout", type=float, default=900)
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()

    base = Path(tempfile.mkdtemp(prefix="b2bench-farm-"))
    ENV.update({k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"})
    ENV["PYTHONPYCACHEPREFIX"] = str(base / "pycache")
    warm = base / "warm"
    warm.mkdir()
    (warm / "one.txt").write_text("true\n")
    timed([sys.executable, "-m", "b2batch", "farm", "one.txt", "--proc", "1"], warm, 120)
    lists = write_lists(base, args.n_true, args.n_sleep)
    ptf = real_pytaskfarmer(args.pytaskfarmer)
    figures: dict = {"cpus": os.cpu_count(), "local": [], "slurm": None}
    ok = True
    cluster = Cluster(f"b2benchf{uuid.uuid4().hex[:6]}")
    try:
        if "local" in args.parts:
            log(f"local: {args.n_true} x true, {args.n_sleep} x sleep 0.1, --proc {args.proc}; PyTaskFarmer: "
                f"{ptf or 'not found'}")
            for _ in range(max(1, args.repeat)):
                creation = file_creation_ms(base)
                figures["local"].append({**local_round(args, base, lists, ptf), "file_creation_ms": creation})
                log(f"a new file in {base} cost {creation:.3f} ms of CPU at the round's start")
        if "slurm" in args.parts:
            if shutil.which("sbatch") is None:
                log("slurm: sbatch is not on PATH; skipped")
            else:
                log(f"slurm: {args.slurm_n} lines of each list; b2batch farm --jobs 2 --proc 1 against one sbatch "
                    f"--array")
                figures["slurm"] = slurm_round(args, base, lists, cluster)
    except KeyboardInterrupt:
        ok = False
    finally:
        cluster.cancel_ours()
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    print(f"farm_throughput: {os.cpu_count()} CPUs; medians over {len(figures['local'])} local round(s)")
    if figures["local"]:
        costs = [r["file_creation_ms"] for r in figures["local"]]
        print(f"  a new file in the bench's folder: {statistics.median(costs):.3f} ms of CPU (median; "
              f"{min(costs):.3f}-{max(costs):.3f}): the farm makes one per line")
    for what in lists:
        rows = [r[what] for r in figures["local"]]
        if not rows:
            continue
        med = {name: statistics.median([r[name] for r in rows if r.get(name)] or [0]) or None
               for name in ("xargs", "b2batch", "pytaskfarmer", "xargs cpu", "b2batch cpu")}
        ptf_time = med["pytaskfarmer"]
        ptf_text = f"{ptf_time:.2f} s" if ptf_time else "not measured or did not finish"
        print(f"  {what:10s} xargs {med['xargs'] or 0:.2f} s, b2batch farm {med['b2batch'] or 0:.2f} s, PyTaskFarmer "
              f"{ptf_text}; "
              f"b2batch / xargs {ratio(med['b2batch'], med['xargs'])} (target <= 1.2), b2batch / PyTaskFarmer "
              f"{ratio(med['b2batch'], med['pytaskfarmer'])} (target < 1); CPU (with the lines') xargs "
              f"{med['xargs cpu'] or 0:.2f} s, b2batch {med['b2batch cpu'] or 0:.2f} s, ratio "
              f"{ratio(med['b2batch cpu'], med['xargs cpu'])}")
    if figures["slurm"]:
        for what, row in figures["slurm"].items():
            print(f"  slurm {what:10s} raw array {row['raw array']:.2f} s, b2batch farm --jobs 2 "
                  f"{row['b2batch'] or 0:.2f} s; ratio {ratio(row['b2batch'], row['raw array'])}")
    print(json.dumps(figures))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
