"""The ``b2batch`` console script's ``run``, ``status`` and ``cancel`` with real workflows: local jobs, and
LSF jobs of the emulator (whose ``bjobs``/``bkill`` the commands call)."""

from __future__ import annotations

import json
import re
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
from conftest import clean_env

from b2batch.command import console

BATCH = ("--batch", "--batch-system", "local")


def b2batch(*args: str, cwd: Path, env: dict[str, str] | None = None, input: str | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "b2batch", *args], cwd=cwd, env=env or clean_env(), text=True,
                          capture_output=True, timeout=timeout, input=input if input is not None else "")


def jobs(script: Path, cwd: Path, env: dict[str, str] | None = None) -> dict[str, dict]:
    done = b2batch("status", str(script), "--json", cwd=cwd, env=env)
    assert done.returncode == 0, done.stderr
    return {job["task"]: job for job in json.loads(done.stdout)}


def wait_for_states(look: Callable[[], dict[str, dict]], wanted: list[str], timeout: float = 60) -> dict[str, dict]:
    """Ask ``look`` for the jobs until their sorted states are ``wanted``; the jobs."""
    deadline = time.monotonic() + timeout
    while True:
        found = look()
        if sorted(job["state"] for job in found.values()) == wanted:
            return found
        assert time.monotonic() < deadline, f"waited for {wanted}, found {found}"
        time.sleep(0.3)


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.kill()
        process.wait()


def test_run_passes_the_arguments_and_the_exit_status(workflow, tmp_path: Path) -> None:
    flow = workflow("experience.py")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    failed = b2batch("run", str(flow.script), "--count", "1", "--fail", "0", cwd=elsewhere)
    assert failed.returncode == 1 and "Failed (1):\n  Part(n=0): in pilot job" in failed.stderr, failed.stderr
    done = b2batch("run", str(flow.script), "--count", "1", "--no-exit", cwd=elsewhere)
    assert done.returncode == 0 and "after process: SUCCESS" in done.stdout
    assert (flow.folder / "results" / "total.txt").is_file()  # paths relative to the script, as with python
    assert b2batch("run", str(tmp_path / "missing.py"), cwd=tmp_path).returncode == 2


def test_status_of_a_finished_run(workflow, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    flow = workflow("experience.py", folder=tmp_path / "project")
    (flow.folder / "settings.json").write_text(json.dumps({"task_file_dir": "jobs"}))
    run = flow.run(*BATCH, "--count", "2", "--fail", "1")
    assert run.returncode == 1
    status = b2batch("status", "project/experience.py", cwd=tmp_path)  # found from the script's folder
    assert status.returncode == 0, status.stderr
    lines = status.stdout.splitlines()
    assert lines[0] == f"Jobs of project/experience.py in {flow.folder / 'jobs'}:"
    assert lines[1].split() == ["task", "system", "job", "id", "state", "detail"]
    rows = {line.split()[0]: line.split()[1:] for line in lines[2:-1]}
    assert rows["Part(n=0)"][0] == "local" and rows["Part(n=0)"][2:] == ["done"]
    assert rows["Part(n=1)"][2:] == ["failed", "exit", "code", "1"]
    assert lines[-1] == "2 job(s): 1 done, 1 failed"  # Total never became a job

    # The same in this process: the JSON, cancel with nothing to cancel, another task_file_dir.
    assert console.status(str(flow.script), as_json=True) == 0
    found = {job["task"]: job for job in json.loads(capsys.readouterr().out)}
    assert found["Part(n=1)"]["exit_code"] == 1 and found["Part(n=1)"]["system"] == "local"
    assert found["Part(n=1)"]["folder"].startswith(str(flow.folder / "jobs" / "Part"))
    assert found["Part(n=1)"]["steering_pid"] == int(found["Part(n=1)"]["job_id"].split(".")[0])
    assert console.cancel(str(flow.script)) == 0
    assert capsys.readouterr().out.startswith("No queued or running jobs")
    assert console.status(str(flow.script), str(tmp_path / "nowhere")) == 0
    assert capsys.readouterr().out == f"No jobs in {tmp_path / 'nowhere'}.\n"
    assert Path.cwd() == tmp_path  # left as it was


def test_status_and_cancel_of_running_local_jobs(workflow, tmp_path: Path) -> None:
    flow = workflow("experience.py")
    (flow.folder / "settings.json").write_text(json.dumps({"local_slots": 1}))
    with open(tmp_path / "steering.err", "w") as err:
        steering = flow.popen(*BATCH, "--count", "2", "--sleep", "60", stdout=subprocess.DEVNULL, stderr=err)
    try:
        # One slot: one part runs, the other waits in the steering process (which one is luigi's choice).
        found = wait_for_states(lambda: jobs(flow.script, flow.folder), ["queued", "running"])
        running = next(job for job in found.values() if job["state"] == "running")
        assert running["detail"].startswith("process ")
        wrapper = psutil.Process(int(running["detail"].split()[1]))

        asked = b2batch("cancel", str(flow.script), cwd=flow.folder)  # stdin empty: not confirmed
        assert asked.returncode == 1 and "Cancel these 2 job(s)? [y/N]" in asked.stdout
        assert "Nothing cancelled" in asked.stdout and steering.poll() is None and wrapper.is_running()

        cancelled = b2batch("cancel", str(flow.script), "--yes", cwd=flow.folder)
        assert cancelled.returncode == 0, cancelled.stdout + cancelled.stderr
        assert f"local: stopping steering process {steering.pid} (SIGTERM)" in cancelled.stdout
        assert steering.wait(timeout=30) != 0
        wrapper.wait(timeout=15)
    finally:
        stop(steering)
    assert "Interrupted" in (tmp_path / "steering.err").read_text()
    states = sorted(job["state"] for job in jobs(flow.script, flow.folder).values())
    assert states == ["cancelled", "cancelled"]  # the running job was killed (exit 143), the queued one never ran
    details = sorted(job["detail"] for job in jobs(flow.script, flow.folder).values())
    assert details == ["cancelled when the run was interrupted (exit code 143)",
                       "cancelled when the run was interrupted, before it started"]
    assert b2batch("cancel", str(flow.script), cwd=flow.folder).stdout.startswith("No queued or running jobs")


def test_status_and_cancel_ask_the_batch_system(workflow, tmp_path: Path) -> None:
    flow = workflow("experience.py")
    env = clean_env(B2BATCH_EMULATOR_DIR=str(tmp_path / "emulator"), B2BATCH_EMULATOR_SLOTS="1")
    (flow.folder / "settings.json").write_text(json.dumps({"poll_interval": 0.3, "max_poll_interval": 1}))
    steering = subprocess.Popen([sys.executable, "-m", "b2batch", "emulate", "lsf", "--", *flow.command(
        "--batch", "--batch-system", "lsf", "--count", "2", "--sleep", "60")], cwd=flow.folder, env=env,
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def emulated(*args: str) -> subprocess.CompletedProcess[str]:
        return b2batch("emulate", "lsf", "--", sys.executable, "-m", "b2batch", *args, cwd=flow.folder, env=env)

    try:
        found = wait_for_states(lambda: {j["task"]: j for j in json.loads(emulated("status", str(flow.script),
                                                                                "--json").stdout or "[]")},
                                ["queued", "running"])
        details = sorted(job["detail"] for job in found.values())
        assert details == ["lsf: pending (PEND)", "lsf: running (RUN)"]  # one slot: the other pends; in words
        ids = sorted(job["job_id"] for job in found.values())

        cancelled = emulated("cancel", str(flow.script), "--yes")
        assert cancelled.returncode == 0, cancelled.stdout + cancelled.stderr
        bkill_line = next(line for line in cancelled.stdout.splitlines() if line.startswith("lsf: bkill "))
        assert sorted(shlex.split(bkill_line)[2:]) == ids  # one call for both jobs, printed as a shell takes it
        _, stderr = steering.communicate(timeout=120)
    finally:
        stop(steering)
    assert steering.returncode == 1, stderr[-3000:]
    assert "2 task(s) failed" in stderr and "lsf state EXIT" in stderr


def test_status_and_cancel_send_htcondor_commands_to_the_schedd_in_the_journal(workflow, tmp_path: Path) -> None:
    flow = workflow("experience.py")
    env = clean_env(B2BATCH_EMULATOR_DIR=str(tmp_path / "emulator"), B2BATCH_EMULATOR_SLOTS="1")
    schedd = f"schedd@{socket.gethostname()}"  # a name the emulated pool knows
    (flow.folder / "settings.json").write_text(json.dumps({"poll_interval": 0.3, "max_poll_interval": 1,
                                                           "htcondor_schedd": schedd}))
    steering = subprocess.Popen([sys.executable, "-m", "b2batch", "emulate", "htcondor", "--", *flow.command(
        "--batch", "--batch-system", "htcondor", "--count", "2", "--sleep", "60")], cwd=flow.folder, env=env,
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def emulated(*args: str) -> subprocess.CompletedProcess[str]:
        return b2batch("emulate", "htcondor", "--", sys.executable, "-m", "b2batch", *args, cwd=flow.folder, env=env)

    def look() -> dict[str, dict]:
        return {j["task"]: j for j in json.loads(emulated("status", str(flow.script), "--json").stdout or "[]")}

    try:
        found = wait_for_states(look, ["queued", "running"])
        assert sorted(job["detail"] for job in found.values()) == ["htcondor: idle (JobStatus 1)",
                                                                   "htcondor: running (JobStatus 2)"]
        # Outside the emulator: condor_q and condor_rm are not on PATH, and status and cancel say so.
        outside = b2batch("status", str(flow.script), cwd=flow.folder, env=env)
        assert outside.returncode == 0 and outside.stdout.count("could not ask htcondor: condor_q is not on PATH") == 2
        assert "exited with 127" not in outside.stdout, outside.stdout
        not_cancelled = b2batch("cancel", "--yes", str(flow.script), cwd=flow.folder, env=env)
        assert not_cancelled.returncode == 1 and "could not be asked about" in not_cancelled.stdout
        assert not_cancelled.stderr.count("condor_q is not on PATH") == 2, not_cancelled.stderr
        journals = sorted((flow.folder / "task_files").glob("*/*/submission.json"))
        assert len(journals) == 2
        assert all(json.loads(j.read_text())["htcondor_place"] == ["-name", schedd] for j in journals)
        # The settings now name another schedd: status and cancel still go where the jobs are.
        (flow.folder / "settings.json").write_text(json.dumps({"htcondor_schedd": "schedd@nowhere.invalid"}))
        assert sorted(job["state"] for job in look().values()) == ["queued", "running"]
        cancelled = emulated("cancel", str(flow.script), "--yes")
        assert cancelled.returncode == 0, cancelled.stdout + cancelled.stderr
        (line,) = [line for line in cancelled.stdout.splitlines() if line.startswith("htcondor: condor_rm ")]
        ids = sorted(job["job_id"] for job in found.values())
        assert shlex.split(line)[2:4] == ["-name", schedd] and sorted(shlex.split(line)[4:]) == ids  # one call
        _, stderr = steering.communicate(timeout=120)
    finally:
        stop(steering)
    assert steering.returncode == 1, stderr[-3000:]
    # A journal that names a schedd the pool does not know: status says that it could not ask.
    journal = journals[0]
    record = {**json.loads(journal.read_text()), "htcondor_place": ["-name", "x@nowhere.invalid"]}
    journal.write_text(json.dumps(record))
    (journal.parent / "exit_code").unlink(missing_ok=True)
    (job,) = [job for job in look().values() if job["job_id"] == record["job_id"]]
    assert job["state"] == "unknown" and "could not ask htcondor" in job["detail"], job


def test_status_lists_the_jobs_of_the_current_tasks(workflow, tmp_path: Path) -> None:
    flow = workflow("experience.py")
    assert flow.run(*BATCH, "--count", "3").returncode == 0
    assert flow.run(*BATCH, "--count", "1").returncode == 0  # Part(n=1), Part(n=2) are not tasks of this run
    status = b2batch("status", str(flow.script), cwd=tmp_path)  # the arguments of the last run
    assert status.returncode == 0, status.stderr
    listed = [line.split()[0] for line in status.stdout.splitlines()[2:-2]]
    assert listed == ["Part(n=0)", "Total()"], status.stdout
    assert status.stdout.splitlines()[-2:] == [
        "2 job(s): 2 done",
        f"2 job folder(s) of other tasks (earlier parameters) not listed: b2batch status --all {flow.script} "
        "lists them too."]
    assert sorted(jobs(flow.script, tmp_path)) == ["Part(n=0)", "Total()"]  # the JSON too
    every = b2batch("status", "--all", str(flow.script), cwd=tmp_path).stdout
    assert every.splitlines()[-1] == "4 job(s): 4 done" and "not listed" not in every
    asked = b2batch("status", str(flow.script), "--count", "2", "--json", cwd=tmp_path)  # the script's arguments
    assert sorted(job["task"] for job in json.loads(asked.stdout)) == ["Part(n=0)", "Part(n=1)", "Total()"]


def test_every_subcommand_has_a_description(capsys: pytest.CaptureFixture[str]) -> None:
    from b2batch.__main__ import main

    with pytest.raises(SystemExit):
        main(["--help"])
    top = capsys.readouterr().out
    assert "console script" not in top and "Run luigi workflows as batch jobs" in top
    names = re.search(r"\{([a-z,]+)\}", top).group(1).split(",")
    assert {"emulate", "settings", "run", "status", "cancel", "farm"} <= set(names)
    for name in names:
        with pytest.raises(SystemExit):
            main([name, "--help"])
        text = capsys.readouterr().out
        description = text.split("\n\n")[1]  # usage, the description, the arguments
        assert not description.startswith(("positional arguments", "options")), f"b2batch {name} --help:\n{text}"
        assert len(description.split()) >= 8, f"b2batch {name} --help:\n{text}"


@pytest.mark.parametrize("system", ["htcondor", "lsf"])
def test_emulate_says_in_one_line_that_a_command_cannot_run(system: str, tmp_path: Path) -> None:
    script = tmp_path / "not-executable.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    for cmd, code, line in [("nosuchcmd", 127, "b2batch emulate: nosuchcmd: command not found"),
                            (str(tmp_path / "nosuch"), 127, f"b2batch emulate: {tmp_path / 'nosuch'}: No such file "
                                                            "or directory"),
                            (str(script), 126, f"b2batch emulate: {script}: Permission denied")]:
        done = b2batch("emulate", system, "--", cmd, "arg", cwd=tmp_path,
                       env=clean_env(B2BATCH_EMULATOR_DIR=str(tmp_path / "emulator")))
        assert (done.returncode, done.stderr, done.stdout) == (code, line + "\n", ""), done.stderr
        shell = subprocess.run(["sh", "-c", shlex.quote(cmd)], capture_output=True)
        assert shell.returncode == code  # as a shell says


@pytest.mark.parametrize("system, tool", [("htcondor", "condor_submit"), ("lsf", "bsub"), ("slurm", "sbatch")])
def test_a_run_says_which_scheduler_tool_is_not_on_path(system: str, tool: str, workflow, tmp_path: Path) -> None:
    flow = workflow("experience.py")
    bare = clean_env(PATH=str(tmp_path / "no-tools"))  # no scheduler tools
    run = flow.run("--batch", "--batch-system", system, "--count", "3", env=bare)
    assert run.returncode == 1
    # One line for the run, not one per task: no job of the run can go without the tool.
    lines = [line for line in run.stderr.splitlines() if f"{tool} is not on PATH" in line]
    assert lines == [f"ERROR: {system} cannot be used here: {tool} is not on PATH: cannot run `{tool} "
                     + lines[0].split(f"cannot run `{tool} ", 1)[1]] if lines else False, run.stderr[-3000:]
    assert "Is batch_system right, and is the scheduler's client installed on this host?" in run.stderr
    assert "rejected the job" not in run.stderr and "exited with 127" not in run.stderr
