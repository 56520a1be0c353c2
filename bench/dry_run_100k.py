#!/usr/bin/env python3
"""Wall time and peak memory of ``--dry-run`` on a 100,000-task graph, against a floor measured in the same run.

The benchmark writes a workflow script with ``--n`` leaf tasks (default 100,000) in groups of
``--group-size`` (default 100): ``Leaf(group, i)`` -> ``GroupSum(group)`` -> one ``Total``, so the graph has
n + n/group-size + 1 tasks, every one with its own output path, none complete. It runs, each in a fresh
Python process (so each has its own peak memory):

  dry run        ``workflow.py --dry-run``: walk the graph, check every task, print what would run
                 (stdout to a file in the temporary folder, whose last line is checked)
  floor b2batch  instantiate the same b2batch tasks and call ``.complete()`` on each, nothing else
  floor luigi    the same with plain ``luigi.Task`` classes whose ``output()`` is a formatted LocalTarget

Output: one line per measurement with wall time (whole process, interpreter start included), peak
resident memory (``ru_maxrss`` of the child, from wait4) and CPU time, then the ratios dry run / floor
b2batch (what walking and printing add) and floor b2batch / floor luigi (what b2batch's output paths and
settings add to each task), then whether the targets of issue 6 hold: under 60 s and under 2 GB.
``--profile`` also runs the dry run under cProfile and prints where its time goes.

Exit status 0 when the measurements ran (also when a target is missed: that is what the output says).
"""

from __future__ import annotations

import argparse
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

WORKFLOW = textwrap.dedent('''
    """The benchmark's graph: Leaf(group, i) -> GroupSum(group) -> Total."""
    import os
    import sys

    import luigi

    import b2batch

    N = int(os.environ["B2BENCH_N"])
    SIZE = int(os.environ["B2BENCH_GROUP_SIZE"])
    GROUPS = (N + SIZE - 1) // SIZE


    def group_size(group):
        return min(SIZE, N - group * SIZE)


    class Leaf(b2batch.Task):
        group = b2batch.IntParameter()
        i = b2batch.IntParameter()

        def output(self):
            yield self.add_to_output("leaf.txt")

        def run(self):
            with open(self.get_output_file_name("leaf.txt"), "w") as f:
                f.write("1\\n")


    class GroupSum(b2batch.Task):
        group = b2batch.IntParameter()

        def requires(self):
            for i in range(group_size(self.group)):
                yield Leaf(group=self.group, i=i)

        def output(self):
            yield self.add_to_output("sum.txt")

        def run(self):
            with open(self.get_output_file_name("sum.txt"), "w") as f:
                f.write(str(len(self.get_input_file_names("leaf.txt"))))


    class Total(b2batch.Task):
        def requires(self):
            for group in range(GROUPS):
                yield GroupSum(group=group)

        def output(self):
            yield self.add_to_output("total.txt")

        def run(self):
            with open(self.get_output_file_name("total.txt"), "w") as f:
                f.write("done\\n")


    class PlainLeaf(luigi.Task):
        group = luigi.IntParameter()
        i = luigi.IntParameter()

        def output(self):
            return luigi.LocalTarget(f"plain/group={self.group}/i={self.i}/leaf.txt")


    class PlainGroupSum(luigi.Task):
        group = luigi.IntParameter()

        def output(self):
            return luigi.LocalTarget(f"plain/group={self.group}/sum.txt")


    class PlainTotal(luigi.Task):
        def output(self):
            return luigi.LocalTarget("plain/total.txt")


    def floor(leaf, group_sum, total):
        """Instantiate every task of the graph and ask whether it is complete: nothing else."""
        complete = 0
        for group in range(GROUPS):
            for i in range(group_size(group)):
                complete += leaf(group=group, i=i).complete()
            complete += group_sum(group=group).complete()
        complete += total().complete()
        print(f"{N + GROUPS + 1} tasks instantiated, {complete} complete")


    if __name__ == "__main__":
        mode = os.environ.get("B2BENCH_MODE", "workflow")
        if mode == "floor-b2batch":
            floor(Leaf, GroupSum, Total)
        elif mode == "floor-luigi":
            floor(PlainLeaf, PlainGroupSum, PlainTotal)
        else:
            b2batch.process(Total())
''')


def measure(label: str, command: list[str], folder: Path, env: dict[str, str], stdout: Path) -> dict[str, float]:
    """Run ``command``; its wall time, peak RSS (MB), CPU time and exit code."""
    with open(stdout, "wb") as out:
        start = time.perf_counter()
        child = subprocess.Popen(command, cwd=folder, env=env, stdout=out, stderr=subprocess.PIPE)
        assert child.stderr is not None
        stderr = child.stderr.read()
        _pid, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    row = {"wall": wall, "rss_mb": usage.ru_maxrss / 1024, "cpu": usage.ru_utime + usage.ru_stime, "code": code}
    print(f"  {label:14s} wall {wall:7.2f} s   peak RSS {row['rss_mb']:7.0f} MB   CPU {row['cpu']:7.2f} s   "
          f"exit {code}", flush=True)
    if code not in (0, 1):
        print(stderr.decode(errors="replace")[-3000:], file=sys.stderr)
        raise SystemExit(f"dry_run_100k: {label} failed with exit {code}")
    return row


def last_line(path: Path) -> str:
    with open(path, "rb") as f:
        f.seek(max(0, path.stat().st_size - 4096))
        lines = f.read().decode(errors="replace").strip().splitlines()
    return lines[-1] if lines else ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100_000, help="leaf tasks (default 100000)")
    parser.add_argument("--group-size", type=int, default=100, help="leaf tasks per GroupSum (default 100)")
    parser.add_argument("--profile", action="store_true",
                        help="also run the dry run under cProfile and print the top functions")
    parser.add_argument("--top", type=int, default=25, help="functions shown with --profile (default 25)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="b2bench-dryrun-"))
    try:
        script = folder / "workflow.py"
        script.write_text(WORKFLOW)
        env = {**os.environ, "B2BENCH_N": str(args.n), "B2BENCH_GROUP_SIZE": str(args.group_size)}
        env.pop("B2BATCH_SETTINGS", None)
        groups = (args.n + args.group_size - 1) // args.group_size
        total = args.n + groups + 1
        print(f"dry_run_100k: {args.n} leaves in {groups} groups of {args.group_size}: {total} tasks, none "
              f"complete; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}; each line a fresh process",
              flush=True)
        py = sys.executable
        # The floors first, then the dry run: the file system caches are as warm for the dry run as for them.
        floor_luigi = measure("floor luigi", [py, str(script)], folder, {**env, "B2BENCH_MODE": "floor-luigi"},
                              folder / "floor-luigi.out")
        floor = measure("floor b2batch", [py, str(script)], folder, {**env, "B2BENCH_MODE": "floor-b2batch"},
                        folder / "floor-b2batch.out")
        dry = measure("dry run", [py, str(script), "--dry-run"], folder, env, folder / "dry-run.out")
        summary = last_line(folder / "dry-run.out")
        expected = f"In total {total} task(s) would run."
        print(f"  dry run said: {summary!r}" + ("" if summary == expected else f"  (EXPECTED {expected!r})"))
        print(f"  ratio dry run / floor b2batch:       wall {dry['wall'] / floor['wall']:5.2f}   "
              f"peak RSS {dry['rss_mb'] / floor['rss_mb']:5.2f}")
        print(f"  ratio floor b2batch / floor luigi:   wall {floor['wall'] / floor_luigi['wall']:5.2f}   "
              f"peak RSS {floor['rss_mb'] / floor_luigi['rss_mb']:5.2f}")
        print(f"  per task: dry run {dry['wall'] / total * 1e6:.0f} us, floor b2batch "
              f"{floor['wall'] / total * 1e6:.0f} us, floor luigi {floor_luigi['wall'] / total * 1e6:.0f} us; "
              f"dry run {dry['rss_mb'] * 1024 / total:.1f} kB")
        ok_time, ok_memory = dry["wall"] < 60, dry["rss_mb"] < 2048
        print(f"  targets (issue 6): wall < 60 s: {'yes' if ok_time else 'NO'}; "
              f"peak RSS < 2 GB: {'yes' if ok_memory else 'NO'}")
        if args.profile:
            profile = folder / "dry-run.prof"
            measure("dry run+cProfile", [py, "-m", "cProfile", "-o", str(profile), str(script), "--dry-run"],
                    folder, env, folder / "dry-run-profiled.out")
            for key in ("cumulative", "tottime"):
                print(f"cProfile of the dry run, top {args.top} by {key}:")
                stats = pstats.Stats(str(profile), stream=sys.stdout)
                stats.strip_dirs().sort_stats(key).print_stats(args.top)
    finally:
        if args.keep:
            print(f"kept {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
