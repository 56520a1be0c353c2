"""A steering process of its own (one thread, as a user's script), for tests/systems/test_local_forks.py: it runs
one scenario of local jobs with ``local_start`` auto and prints one JSON line of what it saw.

``python3 tests/helpers/forked_driver.py SCENARIO FOLDER``. A forked job is forked from a copy of this process, so
the scenarios run here rather than in a pytest worker, whose other threads (and the fork hooks its plugins
register) a fork must not copy.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import sys
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from b2batch.display.jobstates import wrapper_processes  # noqa: E402
from b2batch.engine import Job, Run, collector  # noqa: E402
from b2batch.engine.config import RunConfig  # noqa: E402
from b2batch.engine.files import Launch  # noqa: E402
from b2batch.engine.processes import noted_process  # noqa: E402
from b2batch.jobscript.templating import ENTRY_POINT  # noqa: E402
from b2batch.systems.local import LocalSystem  # noqa: E402
from helpers.simulated import make_job  # noqa: E402


def unit_job(folder: Path, key: str, call: str, *args: object, cwd: Path | None = None,
             env: tuple[tuple[str, str], ...] = ()) -> Job:
    """A local job of one unit whose wrapper would fail (exit 99): only a forked start runs the unit."""
    job = make_job(folder, key, system="local")
    job.files.make_folders()
    job.files.write_spec({"unit": {"call": f"helpers.forked_units:{call}", "args": list(args)}})
    job.files.write_wrapper(f"#!/bin/bash\necho 99 > {job.files.path_of('exit_code')}\nexit 99\n")
    job.files.launch = Launch(f"label of {key}", str(cwd or folder), env, (str(ENTRY_POINT), job.files.path_of("spec")))
    return job


def until_ended(run: Run, job: Job, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not run.poll():
        if time.monotonic() > deadline:
            raise SystemExit(f"job {job.key} did not end within {timeout} s")
        run.wait(0.02)


def _state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def read(path: Path) -> str | None:
    return path.read_text() if path.exists() else None


def main(scenario: str, folder: Path) -> dict:
    before = gc.get_threshold()
    with collector.steering():  # the zygote is forked while a run steers: its jobs have the thresholds of before
        return {**steer(scenario, folder), "gc": {"before": before, "steering": gc.get_threshold()}}


def steer(scenario: str, folder: Path) -> dict:
    run = Run(config=RunConfig(local_start="auto"), poll_pause=0.02)
    run.add_system("local", LocalSystem)
    zygote = run.systems["local"].pool.zygote
    seen: dict = {"zygote": zygote is not None}
    if scenario == "gone":
        os.kill(zygote.pid, signal.SIGKILL)
        os.waitpid(zygote.pid, 0)
    if scenario == "stuck":  # a zygote that does not answer (as one whose fork hook waits) is given up and killed
        import b2batch.systems.local_forks

        b2batch.systems.local_forks.START_TIMEOUT = 0.5
        os.kill(zygote.pid, signal.SIGSTOP)
    os.environ["B2BATCH_TEST_SET_AFTER_THE_ZYGOTE"] = "seen"  # the environment of the moment goes along
    (folder / "work").mkdir(exist_ok=True)
    if scenario in ("does", "gone", "stuck"):
        job = unit_job(folder, "a", "report", str(folder / "seen.json"), cwd=folder / "work",
                       env=(("FROM_ENV", "it's $(not run)"),))
    elif scenario == "setup":
        job = unit_job(folder, "b", "fail", 0, cwd=folder / "missing")
    else:  # a signal's name
        job = unit_job(folder, "c", "sleep", 60)
    try:
        run.submit(job)
        if scenario in ("SIGTERM", "SIGKILL"):
            deadline = time.monotonic() + 20
            while (process := noted_process(job.files.folder)) is None and time.monotonic() < deadline:
                run.poll()
                time.sleep(0.02)
            seen["found by status"] = (process is not None and wrapper_processes(
                [SimpleNamespace(folder=job.files.folder)]).get(str(job.files.folder)) == process)
            os.killpg(process.pid, getattr(signal, scenario))
        until_ended(run, job)
        if scenario == "stuck":  # were it still there, the zygote would now fork the job a second time
            try:
                os.kill(zygote.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
            time.sleep(1.0)
    finally:
        run.close()
    files = job.files
    seen.update({
        "exit_code": job.outcome.exit_code, "exit_code_file": read(files.folder / "exit_code"),
        "setup_failed": read(files.folder / "setup_failed"), "stdout": read(Path(files.log_path("stdout"))),
        "stderr": read(Path(files.log_path("stderr"))), "usage": json.loads(read(files.folder / "usage.json") or "{}"),
        "note": json.loads(read(files.folder / "process") or "{}"), "noted_now": noted_process(files.folder) is not None,
        "facts": json.loads(read(folder / "seen.json") or "{}"), "spec": files.path_of("spec"),
        "steering": {"pid": os.getpid(), "session": os.getsid(0)},
        "zygote_left": zygote is not None and os.path.exists(f"/proc/{zygote.pid}"),
        "zygote_state": _state(zygote.pid) if zygote is not None else None,
    })
    return seen


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], Path(sys.argv[2]))))
