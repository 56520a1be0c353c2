"""Local jobs forked from the run's zygote (``local_start``, b2batch.systems.local_forks): a forked job does
what its wrapper would do, and the run, ``b2batch status`` and a lost zygote deal with it as with a wrapper."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest
from conftest import wait_for

from b2batch.display.jobstates import wrapper_processes
from b2batch.engine import Job, Run
from b2batch.engine.config import RunConfig
from b2batch.engine.files import Launch
from b2batch.engine.processes import noted_process
from b2batch.jobscript.templating import ENTRY_POINT
from b2batch.systems.local import LocalSystem
from helpers.simulated import make_job

HELPERS = str(Path(__file__).resolve().parents[1])


def local_run(mode: str = "fork") -> Run:
    run = Run(config=RunConfig(local_start=mode), poll_pause=0.02)
    run.add_system("local", LocalSystem)
    return run


def unit_job(tmp_path: Path, key: str, call: str, *args: object, cwd: Path | None = None,
             env: tuple[tuple[str, str], ...] = ()) -> Job:
    """A local job of one unit whose wrapper would fail (exit 99): only a forked start runs the unit."""
    job = make_job(tmp_path, key, system="local")
    job.files.make_folders()
    job.files.write_spec({"unit": {"call": f"helpers.forked_units:{call}", "args": list(args)}})
    job.files.write_wrapper(f"#!/bin/bash\necho 99 > {job.files.path_of('exit_code')}\nexit 99\n")
    job.files.launch = Launch(f"label of {key}", str(cwd or tmp_path), env, (str(ENTRY_POINT), job.files.path_of("spec")))
    return job


def run_until_ended(run: Run, jobs: list[Job], timeout: float = 30.0) -> list[Job]:
    ended: list[Job] = []
    deadline = time.monotonic() + timeout
    while len(ended) < len(jobs):
        assert time.monotonic() < deadline, f"jobs still running: {[j.key for j in jobs if j not in ended]}"
        ended += run.poll()
        run.wait(0.02)
    return ended


def system_of(run: Run) -> LocalSystem:
    return run.systems["local"]


def test_a_forked_job_does_what_its_wrapper_would_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = local_run()
    zygote = system_of(run).pool.zygote
    assert zygote is not None
    monkeypatch.setenv("B2BATCH_TEST_SET_AFTER_THE_ZYGOTE", "seen")  # the environment of the moment goes along
    monkeypatch.setenv("PYTHONPATH", HELPERS)
    (tmp_path / "work").mkdir()
    seen = tmp_path / "seen.json"
    job = unit_job(tmp_path, "a", "report", str(seen), cwd=tmp_path / "work", env=(("FROM_ENV", "it's $(not run)"),))
    try:
        run.submit(job)
        assert run_until_ended(run, [job]) == [job]
        assert job.outcome.exit_code == 0
    finally:
        run.close()
    facts = json.loads(seen.read_text())
    assert facts["cwd"] == str(tmp_path / "work")
    assert facts["env"]["FROM_ENV"] == "it's $(not run)"
    assert facts["env"]["B2BATCH_TEST_SET_AFTER_THE_ZYGOTE"] == "seen"
    assert facts["argv"][1:] == [job.files.path_of("spec")]
    assert facts["session"] == facts["pid"] or facts["session"] != os.getsid(0)  # a session of its own
    assert facts["stdin"] == ""  # stdin: /dev/null
    stdout = Path(job.files.log_path("stdout")).read_text()
    assert stdout.startswith("b2batch: job of task label of a started on ")
    assert "a line of the unit on stdout" in stdout
    assert "a line of the unit on stderr" in Path(job.files.log_path("stderr")).read_text()
    assert (job.files.folder / "exit_code").read_text() == "0\n"
    usage = json.loads((job.files.folder / "usage.json").read_text())
    assert usage["source"] == "wrapper" and usage["max_rss"] > 0
    note = json.loads((job.files.folder / "process").read_text())
    assert note["pid"] != zygote.pid and noted_process(job.files.folder) is None  # it ended
    assert not psutil.pid_exists(zygote.pid) or psutil.Process(zygote.pid).status() == psutil.STATUS_ZOMBIE


def test_a_forked_job_that_cannot_enter_its_working_dir_fails_its_set_up(tmp_path: Path) -> None:
    run = local_run()
    job = unit_job(tmp_path, "b", "fail", 0, cwd=tmp_path / "missing")
    try:
        run.submit(job)
        run_until_ended(run, [job])
    finally:
        run.close()
    assert (job.files.folder / "exit_code").read_text() == "3\n"
    reason = f"cannot change into working_dir {tmp_path / 'missing'}"
    assert (job.files.folder / "setup_failed").read_text() == reason + "\n"
    assert f"b2batch: {reason}" in Path(job.files.log_path("stderr")).read_text()
    assert job.outcome.exit_code == 3


@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGKILL, 137)])
def test_a_forked_job_killed_by_a_signal_has_the_wrappers_exit_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    signum: int, code: int) -> None:
    monkeypatch.setenv("PYTHONPATH", HELPERS)
    run = local_run()
    job = unit_job(tmp_path, "c", "sleep", 60)
    try:
        run.submit(job)
        process = wait_for(lambda: run.poll() is not None and noted_process(job.files.folder),
                           what="the forked job's process note")
        # b2batch status and cancel find it as they find a wrapper by its command line
        assert wrapper_processes([SimpleNamespace(folder=job.files.folder)]) == {str(job.files.folder): process}
        os.killpg(process.pid, signum)
        run_until_ended(run, [job])
    finally:
        run.close()
    assert (job.files.folder / "exit_code").read_text() == f"{code}\n"
    assert job.outcome.exit_code == code


def test_a_run_whose_zygote_is_gone_starts_its_jobs_from_their_wrappers(tmp_path: Path,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    run = local_run()
    zygote = system_of(run).pool.zygote
    os.kill(zygote.pid, signal.SIGKILL)
    os.waitpid(zygote.pid, 0)
    job = unit_job(tmp_path, "d", "fail", 0)
    try:
        run.submit(job)
        run_until_ended(run, [job])
    finally:
        run.close()
    assert job.outcome.exit_code == 99  # its wrapper ran
    assert "could not fork job" in caplog.text and "start from their wrappers" in caplog.text


def test_wrapper_mode_and_a_threaded_steering_process_make_no_zygote(tmp_path: Path) -> None:
    import threading

    assert system_of(local_run("wrapper")).pool.zygote is None
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert system_of(local_run("auto")).pool.zygote is None
        forced = local_run("fork")
        assert system_of(forked := forced).pool.zygote is not None
        forked.close()
    finally:
        stop.set()
        thread.join()


STEERING = textwrap.dedent('''
    import sys, time
    from b2batch.engine import Run
    from b2batch.engine.config import RunConfig
    from b2batch.systems.local import LocalSystem
    run = Run(config=RunConfig(local_start="auto"))
    run.add_system("local", LocalSystem)
    print(run.systems["local"].pool.zygote.pid, flush=True)
    time.sleep(60)
''')


@pytest.mark.slow
def test_the_zygote_of_a_killed_steering_process_ends(tmp_path: Path) -> None:
    script = tmp_path / "steering.py"
    script.write_text(STEERING)
    steering = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        zygote = psutil.Process(int(steering.stdout.readline()))
        assert zygote.ppid() == steering.pid
        wait_for(lambda: os.getsid(zygote.pid) == zygote.pid, what="the zygote's session of its own")
        steering.kill()
        steering.wait()
        wait_for(lambda: not zygote.is_running() or zygote.status() == psutil.STATUS_ZOMBIE,
                 what="the zygote to end with its steering process")
    finally:
        steering.kill()
        steering.stdout.close()


POOL = textwrap.dedent('''
    import json, os, sys
    import psutil
    import b2batch
    import b2batch.joblib
    from joblib import Parallel, delayed, parallel_config

    STEERING = os.getpid()

    def started_by(_):
        """What started the pilot that runs this call: its wrapper, or (forked) this steering process."""
        process = psutil.Process()
        while process is not None:
            if any(arg.endswith("executable_wrapper.sh") for arg in process.cmdline()):
                return "wrapper"
            if process.pid == STEERING:
                return "steering process"
            process = process.parent()
        return "neither"

    settings = {"local_start": sys.argv[1]}
    with b2batch.Pool(batch_system="local", verbose=False, settings=settings) as pool:
        mapped = pool.map(started_by, range(100))
    with parallel_config(backend="b2batch", batch_system="local", **settings):
        parallel = Parallel()(delayed(started_by)(x) for x in range(20))
    print(json.dumps(sorted(set(mapped)) + sorted(set(parallel))))
''')


@pytest.mark.slow
@pytest.mark.parametrize("mode, started_by", [("auto", "steering process"), ("wrapper", "wrapper")])
def test_pool_and_joblib_pilots_are_forked_by_default(tmp_path: Path, mode: str, started_by: str) -> None:
    """The default path: b2batch.Pool's and joblib's pilots on local are forked (from the zygote, a child of the
    steering process); with ``local_start`` wrapper they start from their wrappers."""
    (tmp_path / "calls.py").write_text(POOL)
    done = subprocess.run([sys.executable, "calls.py", mode], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout) == [started_by, started_by]
