"""The batch path end to end with the ``local`` batch system: real jobs (wrapper, node-side entry point,
result files) started, polled, failed and killed by real workflow scripts."""

from __future__ import annotations

import hashlib
import json
import re
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest
from conftest import clean_env, tree, wait_for

SETUP = "export FROM_SETUP='from the env script'\n"


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def steering_pid(stdout: str) -> int:
    return int(re.search(r"steering pid (\d+)", stdout).group(1))


def live_processes_mentioning(folder: Path) -> list[psutil.Process]:
    """Processes (not zombies) whose command line names something in ``folder``."""
    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        try:
            if process.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if any(str(folder) in arg for arg in process.info["cmdline"] or ()):
                found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


# --- a workflow of several tasks ------------------------------------------------------------------------------

def test_workflow_of_several_tasks_runs_as_jobs(workflow) -> None:
    flow = workflow("batch.py")
    (flow.folder / "setup.sh").write_text(SETUP)
    (flow.folder / "settings.json").write_text(json.dumps({
        "result_dir": "out", "log_dir": "my_logs", "task_file_dir": "my_jobs", "env_script": "setup.sh",
        "env": {"FROM_ENV": "a value with 'quotes' and $(no substitution)"},
    }))
    run = flow.run("--count", "3")
    assert run.returncode == 0, run.stderr
    assert "4 ran successfully" in run.stderr
    steering = steering_pid(run.stdout)

    parts = [load(flow.folder / "out" / f"n={n}" / "part.json") for n in range(3)]
    assert load(flow.folder / "out" / "total.json")["parts"] == \
        [str(flow.folder / "out" / f"n={n}" / "part.json") for n in range(3)]
    for part in parts:
        assert part["pid"] != steering and part["ppid"] != steering  # the job runs under its wrapper
        assert part["FROM_ENV"] == "a value with 'quotes' and $(no substitution)"
        assert part["FROM_SETUP"] == "from the env script"
        assert part["cwd"] == str(flow.folder)  # the default working_dir: the script's folder

    logs = [name for name in tree(flow.folder / "my_logs") if name.endswith(("/stdout", "/stderr"))]
    assert logs == sorted([f"n={n}/Part/{s}" for n in range(3) for s in ("stderr", "stdout")] +
                          ["Total/stderr", "Total/stdout"])
    assert "part 2 runs in" in (flow.folder / "my_logs" / "n=2" / "Part" / "stdout").read_text()

    jobs = tree(flow.folder / "my_jobs")
    for family, count in (("Part", 3), ("Total", 1)):
        for name in ("job.json", "executable_wrapper.sh", "exit_code", "result.json"):
            assert len([j for j in jobs if j.startswith(f"{family}/") and j.endswith(f"/{name}")]) == count
    for exit_code in (flow.folder / "my_jobs").rglob("exit_code"):
        assert exit_code.read_text().strip() == "0"
    for result in (flow.folder / "my_jobs").rglob("result.json"):
        assert load(result)["status"] == "DONE"
    assert not (flow.folder / "logs").exists() and not (flow.folder / "task_files").exists()


def test_complete_tasks_are_not_submitted_again(workflow) -> None:
    flow = workflow("batch.py")
    assert flow.run("--count", "1").returncode == 0
    before = load(flow.folder / "results" / "n=0" / "part.json")
    (flow.folder / "results" / "total.json").unlink()
    again = flow.run("--count", "1")
    assert again.returncode == 0, again.stderr
    assert "submitted task Part" not in again.stderr
    assert load(flow.folder / "results" / "n=0" / "part.json") == before


# --- failures --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode, code", [("exit", 7), ("raise", 1)])
def test_failing_task_is_reported_with_everything_needed_to_debug_it(workflow, mode: str, code: int) -> None:
    flow = workflow("batch.py")
    run = flow.run("--count", "2", "--fail", "1", "--fail-mode", mode)
    assert run.returncode == 1  # a failed task fails the script
    log = run.stderr
    assert re.search(rf"Task Part \(n=1\) failed: job \S+ on local exited with code {code}\.", log), log
    logs = flow.folder / "logs" / "n=1" / "Part"
    assert f"stdout: {logs / 'stdout'}" in log
    assert f"stderr: {logs / 'stderr'}" in log
    tail = log[log.index("Last lines of stderr:"):]
    assert "part 1 complains, line 29" in tail
    assert "part 1 complains, line 3\n" not in tail  # only the last lines
    if mode == "raise":
        assert "Error: " in log and "RuntimeError: part 1 is broken" in log
    assert "1 failed" in log
    assert (flow.folder / "results" / "n=0" / "part.json").is_file()  # the other part ran
    assert not (flow.folder / "results" / "total.json").exists()
    assert (flow.folder / "task_files" / "Part" / "Part_1_f4fe3360f0" / "exit_code").read_text().strip() == str(code)


def test_a_new_job_starts_with_empty_logs_and_keeps_the_previous_ones(workflow) -> None:
    flow = workflow("batch.py")
    first = flow.run("--count", "2", "--fail", "1", "--fail-mode", "raise")
    assert first.returncode == 1 and "RuntimeError: part 1 is broken" in first.stderr
    second = flow.run("--count", "2", "--fail", "1", "--fail-mode", "exit")
    assert second.returncode == 1
    tail = second.stderr[second.stderr.index("Last lines of stderr:"):]
    assert "part 1 complains" in tail and "RuntimeError" not in tail, "the tail shows the first job's stderr"
    logs = flow.folder / "logs" / "n=1" / "Part"
    assert "RuntimeError: part 1 is broken" in (logs / "stderr.previous").read_text()
    assert "RuntimeError" not in (logs / "stderr").read_text()


@pytest.mark.parametrize("executable, expected", [
    (["/nonexistent/bin/python3"], (r"exited with code 127; the command was not found on the node: check the "
                                    r"setting 'executable' \(now \['/nonexistent/bin/python3'\]\)")),
    ([], r"could not be submitted to local: .*the setting 'executable' must be a non-empty list"),
])
def test_unusable_executable_is_a_clear_error(workflow, executable: list[str], expected: str) -> None:
    flow = workflow("batch.py")
    (flow.folder / "settings.json").write_text(json.dumps({"executable": executable}))
    run = flow.run("--count", "1")
    assert re.search(expected, run.stderr), run.stderr
    assert "Part(n=0)" in run.stderr and "failed" in run.stderr
    assert not (flow.folder / "results").exists()


def test_failing_env_script_is_a_clear_error(workflow) -> None:
    flow = workflow("batch.py")
    (flow.folder / "setup.sh").write_text("echo 'setting up fails' >&2\nfalse\n")
    (flow.folder / "settings.json").write_text(json.dumps({"env_script": "setup.sh"}))
    run = flow.run("--count", "1")
    assert "exited with code 3; the job could not set up its environment" in run.stderr, run.stderr
    assert "setting up fails" in run.stderr  # the end of the job's stderr
    assert "sourcing env_script" in run.stderr


# --- the local slot limit -----------------------------------------------------------------------------------------

def max_overlap(intervals: list[tuple[float, float]]) -> int:
    events = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    running = most = 0
    for _, change in events:
        running += change
        most = max(most, running)
    return most


def test_local_slots_limit_jobs_running_at_once(workflow) -> None:
    flow = workflow("batch.py")
    (flow.folder / "settings.json").write_text(json.dumps({"local_slots": 2}))
    run = flow.run("--count", "4", "--sleep", "2.5")  # 4 workers: luigi would run all 4 parts at once
    assert run.returncode == 0, run.stderr
    parts = [load(p) for p in (flow.folder / "results").glob("n=*/part.json")]
    assert len(parts) == 4
    assert max_overlap([(p["start"], p["end"]) for p in parts]) == 2


# --- interrupting a run -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=["SIGTERM", "SIGINT", "SIGHUP"])
def test_interrupted_run_kills_every_job_it_started(workflow, tmp_path: Path, signum: int) -> None:
    flow = workflow("batch.py")
    stderr = tmp_path / "steering.stderr"
    with open(stderr, "w") as err:
        steering = flow.popen("--count", "2", "--sleep", "300", stdout=subprocess.DEVNULL, stderr=err,
                              start_new_session=True,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        started = flow.folder / "started"
        wait_for(lambda: len(list(started.glob("*.pid"))) == 2, 60, "both jobs to start their task")
        job_pids = [int(p.read_text()) for p in started.glob("*.pid")]
        assert all(alive(pid) for pid in job_pids)
        assert len(live_processes_mentioning(flow.folder)) >= 5  # steering, 2 wrappers, 2 jobs

        steering.send_signal(signum)
        code = steering.wait(timeout=60)
        assert code == 128 + signum  # an interrupted run: its summary, then 128 + the signal, as a shell says
        wait_for(lambda: not any(alive(pid) for pid in job_pids), 15, "the jobs to end")
        wait_for(lambda: not live_processes_mentioning(flow.folder), 15, "no process of the run to remain")
    finally:
        if steering.poll() is None:
            steering.kill()
            steering.wait()
        for process in live_processes_mentioning(flow.folder):
            process.kill()
    log = stderr.read_text()
    name = signal.Signals(signum).name
    assert f"Interrupted by {name}: killed 2 running job(s)" in log, log
    assert "Traceback" not in log, log  # the summary is the end of the output
    assert f"(stopped by {name}):" in log and f"Result: stopped by {name}." in log, log
    summary = log[log.index("===== b2batch summary ====="):]
    assert summary.count("cancelled when the run was interrupted") == 2, summary
    assert "still running when the run ended" not in summary
    for n in range(2):  # each killed job is named, by its task or its task id
        assert any("kill" in line.lower() and (f"Part(n={n})" in line or f"Part_{n}_" in line)
                   for line in log.splitlines()), log
    for exit_code in (flow.folder / "task_files").rglob("exit_code"):
        assert exit_code.read_text().strip() == str(128 + signal.SIGTERM)  # the wrapper got SIGTERM
    assert not (flow.folder / "results").exists()


# --- dynamic dependencies, modules and working_dir -----------------------------------------------------------------

def test_dynamic_dependencies_in_batch_mode(workflow) -> None:
    flow = workflow("dynamic.py")
    run = flow.run()
    assert run.returncode == 0, run.stderr
    assert "3 ran successfully" in run.stderr
    steering = steering_pid(run.stdout)
    gather = load(flow.folder / "results" / "gather.json")
    assert gather["pid"] != steering
    assert [text.split()[0] for text in gather["pieces"]] == ["1", "2"]
    assert all(int(text.split()[1]) not in (steering, gather["pid"]) for text in gather["pieces"])
    # Gather's first job stopped at the yield, its requirements ran as jobs, then a second job finished it;
    # the second job started with an empty log, the first job's log kept beside it
    logs = flow.folder / "logs" / "Gather"
    for log in ("stdout.previous", "stdout"):
        assert (logs / log).read_text().count("b2batch: job of task Gather") == 1, log
    assert load(next((flow.folder / "task_files" / "Gather").rglob("result.json")))["status"] == "DONE"


def test_tasks_of_main_and_of_a_module_run_as_jobs_in_another_working_dir(workflow) -> None:
    flow = workflow("modular.py", "batch_module.py")
    elsewhere = flow.folder / "elsewhere"
    elsewhere.mkdir()
    (flow.folder / "settings.json").write_text(json.dumps({"working_dir": "elsewhere"}))
    run = flow.run()
    assert run.returncode == 0, run.stderr
    assert "3 ran successfully" in run.stderr
    steering = steering_pid(run.stdout)
    main = load(flow.folder / "results" / "main.json")
    modules = [load(flow.folder / "results" / f"n={n}" / "module.json") for n in (1, 2)]
    assert main["module"] == "__main__" and {m["module"] for m in modules} == {"batch_module"}
    for record in (main, *modules):
        assert record["cwd"] == str(elsewhere)
        assert record["pid"] != steering
    assert main["inputs"] == [str(flow.folder / "results" / f"n={n}" / "module.json") for n in (1, 2)]
    assert not (elsewhere / "results").exists()  # relative paths stay relative to the script's folder
    spec = load(next((flow.folder / "task_files" / "ModuleTask").rglob("job.json")))
    assert spec["task_module"] == "batch_module"


def test_workflow_started_from_another_folder(workflow, tmp_path: Path) -> None:
    """Relative settings paths are relative to the script's folder, wherever the script is started from."""
    flow = workflow("batch.py", folder=tmp_path / "project")
    cwd = tmp_path / "somewhere"
    cwd.mkdir()
    done = subprocess.run(flow.command("--count", "1"), check=False, cwd=cwd, env=clean_env(), capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert (flow.folder / "results" / "total.json").is_file()
    assert (flow.folder / "task_files" / "Total").is_dir() and (flow.folder / "logs" / "Total").is_dir()
    assert tree(cwd) == []


def test_task_with_a_path_parameter_and_a_plain_target_runs_as_a_job(workflow) -> None:
    """A parameter value with a slash cannot be an output folder, but log and job folders hash it."""
    flow = workflow("plain_targets.py")
    source = flow.folder / "in put.txt"
    source.write_text("content")
    run = flow.run(str(source))
    assert run.returncode == 0, run.stderr
    assert (flow.folder / "copied.txt").read_text() == "content"
    digest = hashlib.md5(str(source).encode()).hexdigest()
    logs = [name for name in tree(flow.folder / "logs") if name.endswith(("/stdout", "/stderr"))]
    assert logs == [f"source=hashed_{digest}/Copy/stderr", f"source=hashed_{digest}/Copy/stdout"]


def test_restarted_run_follows_the_local_jobs_of_a_killed_one(workflow, tmp_path: Path) -> None:
    """SIGKILL leaves the jobs running (each in a session of its own); the next run follows them."""
    flow = workflow("batch.py")
    with open(tmp_path / "first.log", "w") as log:
        first = flow.popen("--count", "2", "--sleep", "8", stdout=log, stderr=subprocess.STDOUT)
    started = flow.folder / "started"
    try:
        wait_for(lambda: len(list(started.glob("*.pid"))) == 2, 60, "both jobs to start their task")
        pids = {p.name: p.read_text() for p in started.glob("*.pid")}
        first.kill()
        first.wait(timeout=30)
        assert all(alive(int(pid)) for pid in pids.values()), "the jobs did not outlive their steering process"
        second = flow.run("--count", "2")
    finally:
        if first.poll() is None:
            first.kill()
    assert second.returncode == 0, second.stderr[-3000:]
    assert second.stderr.count("still queued or running from an earlier run; following it") == 2, second.stderr
    assert {p.name: p.read_text() for p in started.glob("*.pid")} == pids, "a task ran again"
    for n in range(2):
        assert str(load(flow.folder / "results" / f"n={n}" / "part.json")["pid"]) == pids[f"{n}.pid"]
    assert (flow.folder / "results" / "total.json").is_file()


# --- the local pool's own behaviour --------------------------------------------------------------------------

class _StubJob:
    """What the local pool uses of an engine job: its id and wrapper."""

    def __init__(self, wrapper: Path, job_id: str | None = None) -> None:
        self.job_id = job_id
        self.files = type("Files", (), {"wrapper": wrapper})()


def _script(folder: Path, name: str, body: str) -> Path:
    path = folder / name
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(0o755)
    return path


def test_local_job_that_ignores_sigterm_gets_sigkill_after_the_grace(tmp_path: Path) -> None:
    from b2batch.engine import JobStatus
    from b2batch.systems.local import _Pool

    pid_file = tmp_path / "pid"
    stubborn = _script(tmp_path, "stubborn.sh", f"trap '' TERM\necho $$ > {pid_file}\n"
                       "while true; do sleep 0.1 || true; done\n")
    pool = _Pool(4)
    job = _StubJob(stubborn)
    job.job_id = pool.submit(job)
    pool.update(force=True)
    # the shell creates the file before it writes the pid into it
    wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), 10, "the job to write its pid")
    pid = int(pid_file.read_text())
    started = time.monotonic()
    pool.kill([job], grace=1.0)
    assert 0.9 < time.monotonic() - started < 8, "kill() neither waited for the grace nor escalated"
    assert not alive(pid)
    assert pool.status(job.job_id) == JobStatus.aborted
    assert pool.ended[job.job_id] == -signal.SIGKILL


def test_local_job_that_ends_on_sigterm_is_not_killed_harder(tmp_path: Path) -> None:
    from b2batch.systems.local import _Pool

    pid_file = tmp_path / "pid"
    polite = _script(tmp_path, "polite.sh", f"echo $$ > {pid_file}\nexec sleep 60\n")
    pool = _Pool(4)
    job = _StubJob(polite)
    job.job_id = pool.submit(job)
    pool.update(force=True)
    wait_for(pid_file.exists, 10, "the job to start")
    started = time.monotonic()
    pool.kill([job], grace=30.0)
    assert time.monotonic() - started < 5
    assert pool.ended[job.job_id] == -signal.SIGTERM


def test_local_pool_starts_no_more_than_its_slots_and_answers_waiting_jobs(tmp_path: Path) -> None:
    from b2batch.engine import JobStatus
    from b2batch.systems.local import _Pool

    gate = tmp_path / "gate"
    waiter = _script(tmp_path, "wait.sh", f"while [ ! -e {gate} ]; do sleep 0.05; done\n")
    pool = _Pool(2)
    jobs = [_StubJob(waiter) for _ in range(5)]
    for job in jobs:
        job.job_id = pool.submit(job)
    pool.update(force=True)
    assert [pool.status(job.job_id) for job in jobs] == [JobStatus.running] * 2 + [JobStatus.idle] * 3
    gate.touch()
    wait_for(lambda: (pool.update(force=True), all(pool.status(j.job_id) == JobStatus.successful for j in jobs))[1],
             20, "all jobs to run, two at a time")


def test_a_local_jobs_end_is_news_once_and_the_next_update_looks_at_once(tmp_path: Path) -> None:
    """A run waiting between polls learns at once that a local job's process ended (not at the pool's next
    UPDATE_INTERVAL), and only once: a process not reaped yet makes no busy wait."""
    from b2batch.engine import JobStatus
    from b2batch.systems.local import _Pool

    gate = tmp_path / "gate"
    waiter = _script(tmp_path, "wait.sh", f"while [ ! -e {gate} ]; do sleep 0.05; done\n")
    pool = _Pool(1)
    job = _StubJob(waiter)
    job.job_id = pool.submit(job)
    pool.update(force=True)
    assert pool.status(job.job_id) == JobStatus.running and not pool.any_ended()
    gate.touch()
    wait_for(pool.any_ended, 20, "the job's end to be news")
    assert not pool.any_ended()  # told once
    pool.update()  # within UPDATE_INTERVAL of the last look, yet it looks
    assert pool.status(job.job_id) == JobStatus.successful and not pool.any_ended()


def test_a_wrapper_busy_for_an_instant_still_starts(tmp_path: Path) -> None:
    """A job's wrapper that some process still holds open for writing cannot be executed (ETXTBSY): in a
    steering process with threads, a child forked by another thread holds the just-written wrapper until its
    own exec. The local batch system tries again instead of failing the job (CI saw a joblib pilot fail so)."""
    import os
    import threading

    from b2batch.systems import local

    wrapper = tmp_path / "wrapper.sh"
    marker = tmp_path / "ran"
    wrapper.write_text(f"#!/bin/sh\ntouch {marker}\n")
    wrapper.chmod(0o755)
    held = os.open(wrapper, os.O_WRONLY)  # as the forked child of another thread would hold it
    with pytest.raises(OSError, match="Text file busy"):
        subprocess.Popen([str(wrapper)])
    threading.Timer(0.05, os.close, (held,)).start()
    process = local._start(wrapper)
    assert process.wait(timeout=30) == 0 and marker.exists()


@pytest.mark.parametrize("exit_code, followed", [("0", True), ("1", False), (None, False)])
def test_a_local_job_that_ended_well_before_the_restart_attached_is_followed(tmp_path: Path, exit_code,
                                                                             followed: bool) -> None:
    """The restarted run's front-end saw the killed run's local job still running; it ended before the run
    attached to it (its wrapper is gone). Ended well: followed, and the next poll reports its end (its work is
    not run a second time). Ended badly or killed: submitted again. (CI T: the orphaned-job test saw the second
    submission.)"""
    import socket

    from b2batch.engine import JobStatus, Run
    from b2batch.systems.local import LocalSystem
    from helpers.simulated import make_job

    system = LocalSystem(Run())
    job = make_job(tmp_path, "gone", system="local")
    job.files.make_folders()
    job.files.wrapper.write_text("#!/bin/sh\n")
    if exit_code is not None:
        job.files.exit_code.write_text(f"{exit_code}\n")
    assert system.attach(job, {"system": "local", "job_id": "77.1", "host": socket.gethostname()}) is followed
    if followed:
        assert {j.job_id: state.status for j, state in system.states([job]).items()} == {
            "77.1": JobStatus.successful}
