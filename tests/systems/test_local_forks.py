"""Local jobs forked from the run's zygote (``local_start``, b2batch.systems.local_forks): a forked job does
what its wrapper would do, and the run, ``b2batch status`` and a lost zygote deal with it as with a wrapper."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest
from conftest import wait_for

from b2batch.engine import Run
from b2batch.engine.config import RunConfig
from b2batch.systems.local import LocalSystem

DRIVER = Path(__file__).resolve().parents[1] / "helpers" / "forked_driver.py"


def local_run(mode: str) -> Run:
    run = Run(config=RunConfig(local_start=mode), poll_pause=0.02)
    run.add_system("local", LocalSystem)
    return run


def scenario(name: str, folder: Path) -> dict:
    """Run a scenario in a steering process of its own (helpers/forked_driver.py): what it saw."""
    done = subprocess.run([sys.executable, str(DRIVER), name, str(folder)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "log": done.stderr}


@pytest.mark.slow
def test_a_forked_job_does_what_its_wrapper_would_do(tmp_path: Path) -> None:
    seen = scenario("does", tmp_path)
    assert seen["zygote"] and seen["exit_code"] == 0 and seen["exit_code_file"] == "0\n"  # (its wrapper: 99)
    facts = seen["facts"]
    assert facts["cwd"] == str(tmp_path / "work")
    assert facts["env"]["FROM_ENV"] == "it's $(not run)"
    assert facts["env"]["B2BATCH_TEST_SET_AFTER_THE_ZYGOTE"] == "seen"
    assert facts["argv"][1:] == [seen["spec"]]
    assert facts["session"] == facts["pid"] != seen["steering"]["session"]  # a session of its own
    assert facts["stdin"] == ""  # stdin: /dev/null
    assert seen["stdout"].startswith("b2batch: job of task label of a started on ")
    assert "a line of the unit on stdout" in seen["stdout"]
    assert "a line of the unit on stderr" in seen["stderr"]
    assert seen["usage"]["source"] == "wrapper" and seen["usage"]["max_rss"] > 0
    assert seen["note"]["pid"] == facts["pid"] and not seen["noted_now"]  # noted, and it ended
    assert not seen["zygote_left"]  # it ends with the run
    # the collector's thresholds of the process before its run steered, not the steering ones (engine.collector)
    assert seen["gc"]["steering"][0] > seen["gc"]["before"][0] and facts["gc"] == seen["gc"]["before"]


@pytest.mark.slow
def test_a_forked_job_that_cannot_enter_its_working_dir_fails_its_set_up(tmp_path: Path) -> None:
    seen = scenario("setup", tmp_path)
    reason = f"cannot change into working_dir {tmp_path / 'missing'}"
    assert (seen["exit_code"], seen["exit_code_file"], seen["setup_failed"]) == (3, "3\n", reason + "\n")
    assert f"b2batch: {reason}" in seen["stderr"]


@pytest.mark.slow
@pytest.mark.parametrize("name, code", [("SIGTERM", 143), ("SIGKILL", 137)])
def test_a_forked_job_killed_by_a_signal_has_the_wrappers_exit_code(tmp_path: Path, name: str, code: int) -> None:
    seen = scenario(name, tmp_path)
    assert seen["found by status"]  # b2batch status and cancel find it as they find a wrapper by its command line
    assert (seen["exit_code"], seen["exit_code_file"]) == (code, f"{code}\n")


@pytest.mark.slow
def test_a_run_whose_zygote_is_gone_starts_its_jobs_from_their_wrappers(tmp_path: Path) -> None:
    seen = scenario("gone", tmp_path)
    assert (seen["exit_code"], seen["facts"]) == (99, {})  # its wrapper ran
    assert "could not fork job" in seen["log"] and "start from their wrappers" in seen["log"]


@pytest.mark.slow
def test_a_zygote_that_does_not_answer_is_killed_and_the_job_runs_once_from_its_wrapper(tmp_path: Path) -> None:
    seen = scenario("stuck", tmp_path)
    assert (seen["exit_code"], seen["facts"]) == (99, {})  # its wrapper ran; the zygote forked nothing
    assert "did not answer" in seen["log"] and seen["zygote_state"] is None  # killed and reaped with the run


def test_wrapper_mode_and_a_threaded_steering_process_make_no_zygote() -> None:
    import threading

    from b2batch.systems.local_forks import wanted

    assert local_run("wrapper").systems["local"].pool.zygote is None
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:  # a fork copies only the thread that calls it: auto forks no zygote while another thread runs
        assert not wanted("auto") and local_run("auto").systems["local"].pool.zygote is None
        assert wanted("fork")
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
