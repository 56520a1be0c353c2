#!/usr/bin/env python3
"""How many scheduler commands accounting adds per poll cycle, on the local Slurm (docs/accounting.md).

The workload: ``--n`` trivial jobs (each wrapper writes its exit code and exits) submitted by b2batch's engine
(``Run`` with the Slurm batch system) as job arrays, followed to their end by the usual poll loop, each ended
job settled in the run's record. It runs twice, one after the other: accounting off (the Slurm system's
accounting taken away) and on (one ``sacct`` per poll cycle for all jobs that ended since the last). For each,
one line: the wall time, the poll cycles (status queries: ``squeue`` calls), the scheduler commands by program,
the extra commands per poll cycle (accounting's ``sacct`` calls / poll cycles; at most 1 is the target), the
most ``sacct`` calls in any one cycle, and how many jobs got sacct's figures.

    python bench/accounting.py [--n 1000] [--poll-interval 1] [--max-poll-interval 5]

Jobs are named ``b2bacct<tag>...``; whatever is left of them is cancelled at exit. Exit status 0 when both
runs ended with every job done and the on-run asked at most once per cycle.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from b2batch.engine import Job, Run
from b2batch.engine.config import RunConfig
from b2batch.engine.files import JobFiles
from b2batch.settings import default_of
from b2batch.systems.slurm import SlurmSystem

WRAPPER = "#!/bin/sh\nprintf '0\\n' > {exit_code}.tmp && mv -f {exit_code}.tmp {exit_code}\n"


class CountingSlurm(SlurmSystem):
    """Slurm, with the scheduler commands counted per poll cycle (squeue starts a cycle); accounting on or off."""

    accounting_on = True

    def __init__(self, run: Any) -> None:
        super().__init__(run)
        self.per_cycle: list[Counter[str]] = [Counter()]
        count = self.calls.on_call

        def on_call(program: str) -> None:
            if program == "squeue":
                self.per_cycle.append(Counter())
            self.per_cycle[-1][program] += 1
            if count is not None:
                count(program)

        self.calls.on_call = on_call
        if not self.accounting_on:
            self.accounting.off = "switched off by the benchmark"

    @property
    def has_accounting(self) -> bool:
        return self.accounting_on


def measure(n: int, folder: Path, accounting: bool, poll: float, max_poll: float) -> dict[str, Any]:
    settings = {"poll_interval": poll, "max_poll_interval": max_poll, "job_name": f"b2bacct{os.getpid()}",
                "task_file_dir": str(folder / "task_files"), "slurm_settings": {"mem": "50M"},
                "max_jobs_in_flight": n}

    def setting(name: str) -> Any:
        return settings[name] if name in settings else default_of(name)

    config = RunConfig(poll_interval=poll, max_poll_interval=max_poll, max_array_size=n, max_jobs_in_flight=n)
    run = Run(config=config, poll_pause=0.2)
    CountingSlurm.accounting_on = accounting
    system = run.add_system("slurm", CountingSlurm)
    jobs = []
    for i in range(n):
        files = JobFiles.at(folder / "task_files", "Trivial", f"t{i}", folder / "logs" / f"t{i}")
        files.folder.mkdir(parents=True, exist_ok=True)
        files.wrapper.write_text(WRAPPER.format(exit_code=files.exit_code))
        files.wrapper.chmod(0o755)
        jobs.append(Job(key=f"t{i}", name=f"Trivial({i})", family="Trivial", system="slurm", files=files,
                        settings=setting, params={"i": str(i)}))
    begin = time.monotonic()
    with run.holding():
        for job in jobs:
            run.submit(job)
    ended = 0
    try:
        while ended < n and time.monotonic() - begin < 3600:
            for job in run.poll():
                ended += 1
                run.settle(job, job.outcome is not None and job.outcome.succeeded)
            run.wait()
        system.per_cycle.append(Counter())  # type: ignore[attr-defined]  # the end of the run: its own bucket
        run.close()
    finally:
        if run.live:
            run.interrupt()
    cycles = [c for c in system.per_cycle if c["squeue"]]  # type: ignore[attr-defined]
    closing = system.per_cycle[-1]  # type: ignore[attr-defined]
    accounted = sum(1 for r in run.record.jobs.values() if r.usage and "sacct" in str(r.usage.get("source")))
    done = sum(1 for r in run.record.jobs.values() if r.state == "done")
    return {"seconds": time.monotonic() - begin, "cycles": len(cycles), "calls": dict(run.record.scheduler_calls),
            "sacct": run.record.scheduler_calls.get("sacct", 0),
            "most_sacct_in_a_cycle": max((c["sacct"] for c in cycles), default=0), "at_close": closing["sacct"],
            "accounted": accounted, "done": done}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--poll-interval", type=float, default=1.0)
    parser.add_argument("--max-poll-interval", type=float, default=5.0)
    args = parser.parse_args()
    ok = True
    try:
        for accounting in (False, True):
            with tempfile.TemporaryDirectory(prefix="b2bacct-") as folder:
                found = measure(args.n, Path(folder), accounting, args.poll_interval, args.max_poll_interval)
            per_cycle = (found["sacct"] - found["at_close"]) / max(1, found["cycles"])
            print(f"accounting {'on ' if accounting else 'off'}: {args.n} jobs in {found['seconds']:.1f} s, "
                  f"{found['done']} done; {found['cycles']} poll cycles; commands {found['calls']}; "
                  f"sacct per cycle {per_cycle:.2f} (most in one cycle: {found['most_sacct_in_a_cycle']}, at the end of the "
                  f"run: {found['at_close']}); "
                  f"{found['accounted']} jobs with sacct's figures", flush=True)
            ok = ok and found["done"] == args.n and found["most_sacct_in_a_cycle"] <= 1
    finally:
        subprocess.run(["scancel", f"--name=b2bacct{os.getpid()}"], capture_output=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
