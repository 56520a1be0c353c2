#!/usr/bin/env python3
"""A run without ``--batch``: N trivial tasks + one aggregate that requires them all, ``workers`` 2 (issue 44).

Three sides, each a fresh folder and a fresh interpreter (the whole script is timed: start, imports, the run),
sides alternating within each round; the folders are removed when the bench ends, not between runs:

- ``b2luigi``: the real b2luigi 1.3.0 (the peer venv of tests/peers/install.sh), ``import b2luigi``: luigi's
  own worker (the reference);
- ``engine``: b2batch (``import b2batch``, default settings): the run goes through the engine, in local pilots
  (the setting ``local_runs_on_engine``, on by default);
- ``luigi worker``: b2batch with ``local_runs_on_engine: false`` (a settings file named by
  ``B2BATCH_SETTINGS``): luigi's own worker, as before issue 44.

    python bench/local_runs.py [--tasks 1000] [--workers 2] [--rounds 3] [--sides b2luigi,engine,luigi-worker]
                               [--base FOLDER]

``--base FOLDER`` adds a side ``engine-base``: the engine side with the b2batch of FOLDER (another version's
tree, e.g. ``git archive BASE | tar -x -C FOLDER``) on ``PYTHONPATH``, measured in the same rounds: a before/after
in one sitting.

Prints each round's wall times, the load average before each round, the medians and the ratios against
b2luigi (issue 44's target: ``engine`` at most **0.25x** b2luigi).
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
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHIM = ROOT / "compat" / "b2luigi-shim"
SIDES = ("b2luigi", "engine", "luigi-worker")

SCRIPT = """
import {library} as lib


class Trivial(lib.Task):
    n = lib.IntParameter()

    def output(self):
        yield self.add_to_output("done.txt")

    def run(self):
        with open(self.get_output_file_name("done.txt"), "w") as f:
            f.write("done")


class Aggregate(lib.Task):
    def requires(self):
        return [Trivial(n=n) for n in range({tasks})]

    def output(self):
        yield self.add_to_output("all.txt")

    def run(self):
        with open(self.get_output_file_name("all.txt"), "w") as f:
            f.write("all")


if __name__ == "__main__":
    lib.process(Aggregate(), workers={workers})
"""


def peer_python() -> str:
    """The Python of the venv with the real b2luigi 1.3.0."""
    root = subprocess.run(["bash", str(ROOT / "tests" / "peers" / "install.sh"), "--print"], check=True,
                          capture_output=True, text=True).stdout.strip()
    return str(Path(root) / "b2luigi" / "bin" / "python")


def one_run(side: str, python: str, tasks: int, workers: int, parent: str, root: Path = ROOT) -> float:
    """Wall seconds of one run of the workflow in a fresh folder under ``parent`` (it must write every output),
    b2batch's sides with the b2batch of ``root``."""
    dropped = ("PYTHONPATH", "B2LUIGI_SETTINGS_JSON", "B2BATCH_SETTINGS")
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    library = "b2luigi" if side == "b2luigi" else "b2batch"
    # Every run's folder stays until the bench ends (main removes them all): deleting a run's ~12,000 files right
    # after it made the next side's run pay for it (ext4 mounted with discard: kernel time for seconds after the
    # deletion, os.sync() or not; one engine run took 1.9 s after a fresh folder, 2.6-3.3 s right after an rm).
    folder = tempfile.mkdtemp(prefix=f"{side}-", dir=parent)
    if side != "b2luigi":
        env["PYTHONPATH"] = os.pathsep.join([str(root), str(root / SHIM.relative_to(ROOT))])
    if side == "luigi-worker":
        settings = Path(folder) / "settings.json"
        settings.write_text(json.dumps({"local_runs_on_engine": False}))
        env["B2BATCH_SETTINGS"] = str(settings)
    script = Path(folder) / "flow.py"
    script.write_text(SCRIPT.format(library=library, tasks=tasks, workers=workers))
    start = time.monotonic()
    done = subprocess.run([python, str(script)], cwd=folder, env=env, capture_output=True, text=True,
                          timeout=1800)
    wall = time.monotonic() - start
    written = len(list(Path(folder).rglob("done.txt")))
    if done.returncode != 0 or written != tasks or not list(Path(folder).rglob("all.txt")):
        sys.exit(f"{side} failed (exit {done.returncode}, {written} of {tasks} outputs):\n{done.stderr[-3000:]}")
    if side == "engine" and "local-pilots" not in done.stderr:
        sys.exit(f"engine: the run did not go through local pilots:\n{done.stderr[-3000:]}")
    os.sync()  # what the run wrote goes out now, not during the next side's run
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sides", default=",".join(SIDES))
    parser.add_argument("--base", type=Path, help="a side engine-base: the engine with the b2batch of this folder")
    args = parser.parse_args()
    sides = [s for s in args.sides.split(",") if s]
    unknown = set(sides) - set(SIDES)
    if unknown or "b2luigi" not in sides:
        sys.exit(f"--sides: b2luigi (the reference) and any of {', '.join(SIDES[1:])}; got {args.sides}")
    if args.base is not None:
        if not (args.base / "b2batch" / "__init__.py").is_file():
            sys.exit(f"--base: no b2batch package in {args.base}")
        sides.append("engine-base")
    parent = tempfile.mkdtemp(prefix="b2batch-local-runs-")
    try:
        measure(args, sides, parent)
    finally:
        shutil.rmtree(parent, ignore_errors=True)


def measure(args: argparse.Namespace, sides: list[str], parent: str) -> None:
    pythons = {side: peer_python() if side == "b2luigi" else sys.executable for side in sides}
    walls: dict[str, list[float]] = {side: [] for side in sides}
    for round_number in range(1, args.rounds + 1):
        load = os.getloadavg()[0]
        for side in sides:
            if side == "engine-base":
                walls[side].append(one_run("engine", pythons[side], args.tasks, args.workers, parent,
                                             args.base.resolve()))
                continue
            walls[side].append(one_run(side, pythons[side], args.tasks, args.workers, parent))
        print(f"round {round_number} (load {load:.2f}): "
              + ", ".join(f"{side} {walls[side][-1]:.2f} s" for side in sides), flush=True)
    medians = {side: statistics.median(walls[side]) for side in sides}
    print(f"{args.tasks} trivial tasks + aggregate, workers={args.workers}, no --batch, median of {args.rounds}: "
          + ", ".join(f"{side} {medians[side]:.2f} s" for side in sides))
    for side in sides[1:]:
        target = " (target <= 0.25x)" if side.startswith("engine") else ""
        print(f"ratio {side} / b2luigi: {medians[side] / medians['b2luigi']:.2f}x{target}")
    if "engine" in medians and "engine-base" in medians:
        print(f"engine / engine-base: {medians['engine'] / medians['engine-base']:.2f}")
    print(json.dumps({"tasks": args.tasks, "workers": args.workers, "walls": walls, "medians": medians}))


if __name__ == "__main__":
    main()
