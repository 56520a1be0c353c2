#!/usr/bin/env python3
"""How fast ``b2batch farm`` as pilot jobs stops (issue 26: ``--timeout T`` within T + 5 s, SIGUSR1 and SIGTERM
within 5 s, running lines back in ``toprocess``, no pilot left in the queue), against PyTaskFarmer 0.1.0 on
local cores, measured in the same run.

Each scenario farms four ``sleep 30`` lines over 2 processes, in a fresh folder:

    timeout     ``--timeout T``: seconds from the start to the exit
    SIGUSR1     SIGUSR1 once two lines run: seconds from the signal to the exit
    SIGTERM     SIGTERM likewise

and prints, for PyTaskFarmer (local cores, the reference) and b2batch (pilot jobs on ``--system``): those
seconds, the lines back in ``toprocess``, the pilots still queued 0 s after the exit, and the ratio.

    python3 bench/farm_stop.py [--system slurm] [--timeout 12] [--scenarios timeout SIGUSR1 SIGTERM] [--keep]

PyTaskFarmer comes from its venv (``tests/peers/install.sh``), else from PATH.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
LINES = ["sleep 30"] * 4


def peer_command() -> list[str] | None:
    root = subprocess.run(["bash", str(HERE.parent / "tests" / "peers" / "install.sh"), "--print"],
                          capture_output=True, text=True, check=False).stdout.strip()
    script = Path(root) / "pytaskfarmer" / "bin" / "pytaskfarmer.py"
    if script.exists():
        return [str(script.parent / "python"), str(script)]
    found = shutil.which("pytaskfarmer.py")
    return [sys.executable, found] if found else None


def lines_running(workdir: Path) -> int:
    return len(list((workdir / "logs").glob("log_*"))) if (workdir / "logs").is_dir() else 0


def count(workdir: Path, name: str) -> int:
    path = workdir / name
    return len(path.read_text().splitlines()) if path.exists() else 0


def queued(system: str, tag: str) -> int:
    """Jobs of this run still in ``system``'s queue (by the work folder in their name or command)."""
    if system == "slurm":
        out = subprocess.run(["squeue", "-h", "-o", "%i %o"], capture_output=True, text=True, check=False).stdout
    elif system == "sge":
        out = subprocess.run(["qstat", "-xml"], capture_output=True, text=True, check=False).stdout
    else:
        out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=False).stdout
    return sum(tag in line for line in out.splitlines())


def play(command: list[str], folder: Path, scenario: str, timeout: int) -> tuple[float, int]:
    """Run one scenario; (seconds to the exit from the start or the signal, lines back in toprocess)."""
    folder.mkdir(parents=True)
    (folder / "tasks.txt").write_text("\n".join(LINES) + "\n")
    args = [*command, "tasks.txt", "--proc", "2", "--workdir", "wd"]
    if scenario == "timeout":
        args += ["--timeout", str(timeout)]
    started = time.monotonic()
    process = subprocess.Popen(args, cwd=folder, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    if scenario != "timeout":
        while lines_running(folder / "wd") < 2 and process.poll() is None and time.monotonic() - started < 120:
            time.sleep(0.05)
        time.sleep(1)
        started = time.monotonic()
        process.send_signal(signal.SIGUSR1 if scenario == "SIGUSR1" else signal.SIGTERM)
    try:
        process.wait(timeout=180)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    seconds = time.monotonic() - started
    time.sleep(0.5)  # PyTaskFarmer's lines die with their pool; ours are put back before the exit
    return seconds, count(folder / "wd", "toprocess")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--system", default="slurm", help="batch system of b2batch's pilots (slurm, sge, local)")
    parser.add_argument("--timeout", type=int, default=12, help="T of the timeout scenario (seconds)")
    parser.add_argument("--scenarios", nargs="+", default=["timeout", "SIGUSR1", "SIGTERM"])
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    options = parser.parse_args()
    peer = peer_command()
    base = Path(tempfile.mkdtemp(prefix="b2batch-farm-stop-"))
    ours = [sys.executable, "-m", "b2batch", "farm", "--batch-system", options.system, "--jobs", "1"]
    print(f"load {os.getloadavg()[0]:.1f}; b2batch farm on {options.system} pilots, PyTaskFarmer on local cores")
    print(f"{'scenario':<9} {'tool':<13} {'seconds':>8} {'toprocess':>9} {'queued':>6}  target")
    try:
        for scenario in options.scenarios:
            limit = options.timeout + 5 if scenario == "timeout" else 5
            reference = None
            if peer is not None:
                reference, back = play(peer, base / scenario / "peer", scenario, options.timeout)
                print(f"{scenario:<9} {'PyTaskFarmer':<13} {reference:8.2f} {back:9d} {'-':>6}")
            folder = base / scenario / "b2batch"
            seconds, back = play(ours, folder, scenario, options.timeout)
            left = queued(options.system, str(folder))
            ratio = f" ({seconds / reference:.2f}x PyTaskFarmer)" if reference else ""
            verdict = "met" if seconds < limit and left == 0 and back == len(LINES) else "MISSED"
            print(f"{scenario:<9} {'b2batch':<13} {seconds:8.2f} {back:9d} {left:6d}  < {limit} s, "
                  f"{len(LINES)} back, 0 queued: {verdict}{ratio}")
    finally:
        if options.keep:
            print(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
