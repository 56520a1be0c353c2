#!/usr/bin/env python3
"""SIGKILLs of the steering process around submission on the HTCondor and LSF emulators: duplicates and lost
tasks (issue 39, must-have 5; 0 and 0 expected).

Each kill starts tests/workflows/submit_kill.py (an engine run of ``--n`` tasks of ``--seconds`` each, as one
array or one submission per task), SIGKILLs it at a random instant before the submission, while the emulator's
submit command holds its answer back (the ``submit-delay`` injection: the jobs are queued, the steering process
has no id yet) or right after it, runs it again to the end and waits until the emulator has no job of it left.
A task whose job ran twice counts as a duplicate, one without a successful job as lost.

    python bench/submit_kills.py --kills 200                 # alternating htcondor and lsf
    python bench/submit_kills.py --kills 20 --systems lsf --submit-delay 0.5
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "workflows"))
import submit_kill  # noqa: E402

from b2batch.emulators import make_bin_dir  # noqa: E402


def environment(system: str, folder: Path, delay: float) -> dict[str, str]:
    """An environment with the emulator of ``system`` (its own state in ``folder``) first on PATH."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    bin_dir = make_bin_dir(system, folder / "bin")
    env.update(B2BATCH_EMULATOR_DIR=str(folder / "emulator"), PATH=f"{bin_dir}{os.pathsep}{env['PATH']}")
    subprocess.run([sys.executable, "-m", "b2batch.emulators", "inject", system, "submit-delay", str(delay)],
                   env=env, check=True, capture_output=True)
    return env


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=200)
    parser.add_argument("--systems", default="htcondor,lsf")
    parser.add_argument("--n", type=int, default=3, help="tasks per steering process")
    parser.add_argument("--seconds", type=float, default=1.0, help="run time of each job")
    parser.add_argument("--submit-delay", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=39)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    systems = args.systems.split(",")
    totals: dict[str, collections.Counter[str]] = {s: collections.Counter() for s in systems}
    failures: list[str] = []
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="b2b-kills-") as temporary:
        envs = {s: environment(s, Path(temporary) / s, args.submit_delay) for s in systems}
        for k in range(args.kills):
            system = systems[k % len(systems)]
            result = submit_kill.cycle(Path(temporary) / system / f"kill{k}", system, envs[system], n=args.n,
                                       seconds=args.seconds, array=rng.random() < 0.5,
                                       window=args.submit_delay + 0.1, rng=rng)
            count = totals[system]
            count["kills"] += 1
            count[f"killed {result['phase']}"] += 1
            count["arrays"] += bool(result["array"])
            count["adopted jobs"] += int(result["adopted"])  # type: ignore[call-overload]
            count["duplicates"] += int(result["duplicates"])  # type: ignore[call-overload]
            count["lost"] += int(result["lost"])  # type: ignore[call-overload]
            count["failed reruns"] += result["rerun"] != 0
            if result["duplicates"] or result["lost"] or result["rerun"]:
                failures.append(f"{system} kill {k}: {result}")
            if (k + 1) % 20 == 0:
                print(f"{k + 1} kills, {time.monotonic() - began:.0f} s", flush=True)
    for system, count in totals.items():
        print(f"{system}: " + ", ".join(f"{key} {count[key]}" for key in (
            "kills", "killed before", "killed during", "killed after", "arrays", "adopted jobs", "duplicates",
            "lost", "failed reruns")))
    duplicates = sum(count["duplicates"] for count in totals.values())
    lost = sum(count["lost"] for count in totals.values())
    print(f"total: {sum(c['kills'] for c in totals.values())} kills in {time.monotonic() - began:.0f} s, "
          f"duplicates {duplicates}, lost tasks {lost}")
    for failure in failures[:10]:
        print(failure)
    return 1 if duplicates or lost or failures else 0


if __name__ == "__main__":
    sys.exit(main())
