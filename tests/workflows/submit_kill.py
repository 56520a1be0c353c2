"""A steering process for SIGKILL tests around submission (tests/engine/test_submit_kills.py, bench/submit_kills.py).

    python submit_kill.py FOLDER --system lsf --n 4 --seconds 1.5 [--array] [--name NAME] [--checked-before]

drives an engine run (no luigi) of N tasks ``task<i>`` in FOLDER/task_files/Work/task<i>/: each job appends a
"start" line to FOLDER/runs/task<i>.txt, sleeps, and writes its exit code. A task whose job already wrote exit
code 0 is done and not handed to the run (as a front-end's outputs check would; ``--checked-before``: every task
is handed, as if that check had run before their jobs ended). ``--array``: the tasks go in one submission (an
array), else one submission each. Exit status 0 when every task's job succeeded.

:func:`cycle` is one kill: start this script, SIGKILL it at a random instant before, during or right after the
scheduler call, run it again to the end, wait until the scheduler has no job of it left, and count the jobs each
task ran (duplicates) and the tasks without a successful job (lost).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve()


def _settings(system: str, name: str, folder: Path, array: bool) -> dict[str, object]:
    return {"job_name": name, "poll_interval": 0.2, "max_poll_interval": 0.5, "output_wait_timeout": 3,
            "scheduler_call_timeout": 60, "max_resubmissions": 0, "task_file_dir": str(folder / "task_files"),
            "log_dir": str(folder / "logs"), "sge_settings": {}, "slurm_settings": {}, "lsf_settings": {}}


def steer(folder: Path, system: str, n: int, seconds: float, array: bool, name: str,
          checked_before: bool = False) -> int:
    """Run the N tasks on ``system`` to their end; 0 if all succeeded."""
    from b2batch.engine import Job, JobFiles, Run
    from b2batch.engine.config import RunConfig
    from b2batch.settings.resolve import resolve_job_config
    from b2batch.systems import system_class

    own = _settings(system, name, folder, array)
    job_config = resolve_job_config(None).replace(**own)
    config = RunConfig(poll_interval=0.2, max_poll_interval=0.5, max_array_size=n if array else 1,
                       submission_window=0.0, scheduler_call_timeout=60)
    run = Run(config=config)
    run.add_system(system, system_class(system))
    (folder / "runs").mkdir(parents=True, exist_ok=True)
    jobs = []
    for i in range(n):
        key = f"task{i}"
        files = JobFiles.at(folder / "task_files", "Work", key, folder / "logs" / key)
        files.make_folders()
        if files.read_exit_code() == 0 and not checked_before:
            continue  # done: its outputs are there
        files.write_spec({"task_family": "Work", "task_params": {"i": i}})  # for b2batch status
        files.write_wrapper(f"#!/bin/sh\necho \"start $$ $(date +%s.%N)\" >> {folder}/runs/{key}.txt\n"
                            f"sleep {seconds}\necho 0 > {files.path_of('exit_code')}\n")
        jobs.append(Job(key=key, name=f"Work({key})", family="Work", system=system, files=files, config=job_config))
    with run.holding():
        for job in jobs:
            run.submit(job)
    failed = 0
    while run.live:
        for job in run.poll():
            failed += not job.outcome.succeeded
        run.wait(0.1)
    run.close()
    print(f"ended: {len(jobs)} job(s), {failed} failed", flush=True)
    return 1 if failed else 0


# --- one kill --------------------------------------------------------------------------------------------------


def _state(folder: Path, n: int) -> str:
    """How far the submission got: "before" (no intent), "during" (intents, no journal), "after" (journals)."""
    base = folder / "task_files" / "Work"
    intents = sum((base / f"task{i}" / "submitting.json").exists() for i in range(n))
    journals = sum((base / f"task{i}" / "submission.json").exists() for i in range(n))
    return "after" if journals else "during" if intents else "before"


def active_jobs(system: str, name: str, env: dict[str, str]) -> int:
    """How many jobs named ``name...`` the scheduler has queued or running."""
    tool = [sys.executable, "-m", "b2batch.emulators"] if system in ("lsf", "htcondor") else []
    if system == "lsf":
        out = subprocess.run([*tool, "bjobs", "-json", "-o", "jobid stat job_name"], env=env, capture_output=True,
                             text=True, check=True).stdout
        return sum(r.get("STAT") in ("PEND", "RUN") for r in json.loads(out)["RECORDS"]
                   if str(r.get("JOB_NAME", "")).startswith(name))
    if system == "htcondor":
        out = subprocess.run([*tool, "condor_q", "-json", "-attributes", "JobStatus,B2BatchSubmission"], env=env,
                             capture_output=True, text=True, check=True).stdout
        return sum(str(ad.get("B2BatchSubmission", "")).startswith(name) for ad in (json.loads(out) if out.strip()
                                                                                       else []))
    if system == "slurm":
        out = subprocess.run(["squeue", "--noheader", "--array", "--format=%j"], env=env, capture_output=True,
                             text=True, check=True).stdout
        return sum(line.strip().startswith(name) for line in out.splitlines())
    out = subprocess.run(["qstat", "-xml"], env=env, capture_output=True, text=True, check=True).stdout
    return out.count(f"<JB_name>{name}")


def cycle(folder: Path, system: str, env: dict[str, str], n: int = 3, seconds: float = 1.0, array: bool = False,
          phase: str = "", window: float = 0.4, rng: random.Random | None = None) -> dict[str, object]:
    """One SIGKILL of the steering process and a rerun; what happened (phase, duplicates, lost, ...)."""
    rng = rng or random.Random()
    phase = phase or rng.choice(["before", "during", "during", "after"])
    name = f"k{os.getpid() % 1000}x{rng.randrange(16 ** 6):06x}"
    command = [sys.executable, str(HERE), str(folder), "--system", system, "--n", str(n), "--seconds", str(seconds),
               "--name", name, *(["--array"] if array else [])]
    folder.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    first = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if phase == "before":
        time.sleep(rng.uniform(0.0, 0.6))
    else:
        while _state(folder, n) == "before" and first.poll() is None and time.monotonic() - started < 60:
            time.sleep(0.002)
        time.sleep(rng.uniform(0.0, window))
    first.send_signal(signal.SIGKILL)
    first.wait()
    seen = _state(folder, n)
    rerun = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    deadline = time.monotonic() + 120
    while active_jobs(system, name, env) and time.monotonic() < deadline:
        time.sleep(0.3)
    runs = [len((folder / "runs" / f"task{i}.txt").read_text().splitlines())
            if (folder / "runs" / f"task{i}.txt").exists() else 0 for i in range(n)]
    codes = [(folder / "task_files" / "Work" / f"task{i}" / "exit_code") for i in range(n)]
    lost = sum(not (code.exists() and code.read_text().strip() == "0") for code in codes)
    return {"phase": seen, "array": array, "duplicates": sum(max(0, r - 1) for r in runs), "lost": lost,
            "rerun": rerun.returncode, "adopted": rerun.stderr.count("found by its tag"),
            "rerun_output": (rerun.stdout + rerun.stderr)[-3000:]}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("folder", type=Path)
    parser.add_argument("--system", required=True)
    parser.add_argument("--n", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--array", action="store_true")
    parser.add_argument("--name", default="kill")
    parser.add_argument("--checked-before", action="store_true")
    args = parser.parse_args()
    import logging

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    return steer(args.folder.resolve(), args.system, args.n, args.seconds, args.array, args.name,
                 args.checked_before)


if __name__ == "__main__":
    sys.exit(main())
