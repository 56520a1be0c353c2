#!/usr/bin/env python3
"""``--batch`` with ``batch_system = "local"`` and ``workers``: N tasks that sleep S seconds each, run by the real
b2luigi 1.3.0 (the peer venv of tests/peers/install.sh) and by b2batch through the shim, in the same sitting, each
side in a fresh folder, sides alternating. b2luigi's luigi worker runs ``workers`` tasks at once in processes of
their own; issue 40's target: b2batch's wall time at most 1.1x b2luigi's.

    python bench/b2luigi_local_workers.py [--tasks 6] [--seconds 2] [--workers 3] [--rounds 3]

Prints each round's wall times (the whole script: interpreter start, imports, the run) and the ratio of the
medians, b2batch over b2luigi.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHIM = ROOT / "compat" / "b2luigi-shim"

SCRIPT = """
import sys
import time

import b2luigi


class Sleep(b2luigi.Task):
    n = b2luigi.IntParameter()

    def output(self):
        yield self.add_to_output("done.txt")

    def run(self):
        time.sleep({seconds})
        with open(self.get_output_file_name("done.txt"), "w") as f:
            f.write("done")


if __name__ == "__main__":
    b2luigi.set_setting("batch_system", "local")
    b2luigi.process([Sleep(n=n) for n in range({tasks})], workers={workers}, batch=True)
"""


def peer_python() -> str:
    """The Python of the venv with the real b2luigi 1.3.0."""
    root = subprocess.run(["bash", str(ROOT / "tests" / "peers" / "install.sh"), "--print"], check=True,
                          capture_output=True, text=True).stdout.strip()
    return str(Path(root) / "b2luigi" / "bin" / "python")


def one_run(python: str, ours: bool, text: str, tasks: int) -> float:
    """Wall seconds of one run of the script in a fresh folder (it must write all ``tasks`` outputs)."""
    dropped = ("PYTHONPATH", "B2LUIGI_SETTINGS_JSON", "B2BATCH_SETTINGS")
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    if ours:
        env["PYTHONPATH"] = os.pathsep.join([str(SHIM), str(ROOT)])
    with tempfile.TemporaryDirectory(prefix="b2luigi-local-workers-") as folder:
        script = Path(folder) / "flow.py"
        script.write_text(text)
        start = time.monotonic()
        done = subprocess.run([python, str(script)], cwd=folder, env=env, capture_output=True, text=True,
                              timeout=600)
        wall = time.monotonic() - start
        if done.returncode != 0 or len(list(Path(folder).rglob("done.txt"))) != tasks:
            sys.exit(f"{'b2batch' if ours else 'b2luigi'} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return wall


def main() -> None:
    """Run both sides ``--rounds`` times and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    text = SCRIPT.format(seconds=args.seconds, tasks=args.tasks, workers=args.workers)
    peer = peer_python()
    walls: dict[str, list[float]] = {"b2luigi": [], "b2batch": []}
    for round_number in range(1, args.rounds + 1):
        walls["b2luigi"].append(one_run(peer, False, text, args.tasks))
        walls["b2batch"].append(one_run(sys.executable, True, text, args.tasks))
        print(f"round {round_number}: b2luigi {walls['b2luigi'][-1]:.2f} s, b2batch {walls['b2batch'][-1]:.2f} s",
              flush=True)
    theirs, ours = statistics.median(walls["b2luigi"]), statistics.median(walls["b2batch"])
    print(f"{args.tasks} tasks x {args.seconds:g} s, workers={args.workers}, median of {args.rounds}: "
          f"b2luigi {theirs:.2f} s, b2batch {ours:.2f} s, ratio {ours / theirs:.2f}x (target <= 1.1x)")


if __name__ == "__main__":
    main()
