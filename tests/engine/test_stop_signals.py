"""Every way a run can be stopped cancels its queued and running jobs and says which signal stopped it (issue
31, 3): ``timeout`` (which signals the command, then its whole process group), SIGTERM, SIGINT or SIGHUP sent
to the ``b2batch emulate`` wrapper alone (it passes them on and waits), the process group signalled as a CI
runner does, a repeated signal while the run cancels, a parent shell whose terminal goes away, and real Slurm.
(Ctrl-C, SIGTERM and SIGHUP on local jobs: ``test_local_batch.py``.)

The workflow is ``workflows/batch.py``: parts that sleep, on an emulated pool of one slot, so that one job
runs and the others wait in the queue when the signal comes."""

from __future__ import annotations

import json
import os
import pty
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import clean_env, process_alive, wait_for

PARTS = 3


class Steering:
    """``workflows/batch.py`` started under a command prefix (the emulator, ``timeout``), its stderr in a file."""

    def __init__(self, workflow, tmp_path: Path, system: str) -> None:
        self.flow = workflow("batch.py")
        self.system = system
        self.stderr = tmp_path / "steering.stderr"
        self.env = clean_env(B2BATCH_EMULATOR_DIR=str(tmp_path / "emulator"), B2BATCH_EMULATOR_SLOTS="1")
        (self.flow.folder / "settings.json").write_text(json.dumps({"poll_interval": 0.3, "max_poll_interval": 1}))

    def command(self, *prefix: str) -> list[str]:
        emulated = self.system in ("htcondor", "lsf")
        emulate = [sys.executable, "-m", "b2batch", "emulate", self.system, "--"] if emulated else []
        return [*prefix, *emulate, *self.flow.command("--batch", "--batch-system", self.system,
                                                      "--count", str(PARTS), "--sleep", "300")]

    def start(self, *prefix: str, **kwargs: object) -> subprocess.Popen[bytes]:
        with open(self.stderr, "w") as err:
            return subprocess.Popen(self.command(*prefix), cwd=self.flow.folder, env=self.env,  # type: ignore
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, **kwargs)

    def log(self) -> str:
        return self.stderr.read_text()

    def job_ids(self) -> list[str]:
        return re.findall(r"Job (\S+): submitted task Part", self.log())

    def wait_for_queue(self) -> list[str]:
        """Wait until every part was submitted and one runs (the others wait for the slot); their job ids."""
        wait_for(lambda: len(self.job_ids()) == PARTS, 90, "every part to be submitted")
        wait_for(lambda: list((self.flow.folder / "started").glob("*.pid")), 90, "a part to run")
        return self.job_ids()

    def live_jobs(self, ids: list[str]) -> list[str]:
        """Which of ``ids`` the batch system still has queued or running."""
        if self.system == "local":  # the parts' processes (queued ones have none)
            return [pid.stem for pid in (self.flow.folder / "started").glob("*.pid")
                    if process_alive(int(pid.read_text()))]
        if self.system == "slurm":
            out = subprocess.run(["squeue", "--noheader", "--array", "--states=PD,R,CF,S", "--format=%i"],
                                 capture_output=True, text=True, check=True).stdout.split()
        elif self.system == "htcondor":
            out = self.tool("condor_q", "-json", "-attributes", "ClusterId,ProcId,JobStatus")
            out = [f"{ad['ClusterId']}.{ad['ProcId']}" for ad in (json.loads(out) if out.strip() else [])
                   if ad["JobStatus"] in (1, 2, 5)]
        else:
            records = json.loads(self.tool("bjobs", "-json", "-o", "jobid stat"))["RECORDS"]
            out = [r["JOBID"] for r in records if r.get("STAT") in ("PEND", "RUN")]
        return [i for i in ids if i in out]

    def tool(self, *args: str) -> str:
        return subprocess.run([sys.executable, "-m", "b2batch.emulators", *args], env=self.env, capture_output=True,
                              text=True, timeout=60, check=True).stdout

    def assert_stopped_and_cancelled(self, ids: list[str], signal_name: str) -> None:
        log = self.log()
        assert f"Interrupted by {signal_name}: killed {PARTS} running job(s)" in log, log[-4000:]
        assert f"Result: stopped by {signal_name}." in log and "Traceback" not in log, log[-4000:]
        wait_for(lambda: not self.live_jobs(ids), 30, f"the jobs {ids} to leave the queue")
        if self.system in ("htcondor", "lsf"):
            command = {"htcondor": "condor_rm", "lsf": "bkill"}[self.system]
            assert re.search(rf"Scheduler commands: .*\b1 {command}\b", log), log[-2000:]


def stop(process: subprocess.Popen[bytes], timeout: float = 90) -> int:
    try:
        return process.wait(timeout=timeout)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.mark.parametrize("system", ["htcondor", "local"])
def test_timeout_cancels_the_jobs_of_a_run(workflow, tmp_path: Path, system: str) -> None:
    """``timeout`` sends SIGTERM to the command (the emulate wrapper, which passes it on), and then to its own
    process group, scheduler commands included: the run gets SIGTERM twice, and neither may cut its cancelling
    short."""
    steering = Steering(workflow, tmp_path, system)
    process = steering.start("timeout", "25", start_new_session=True)
    ids = steering.wait_for_queue()
    assert stop(process) == 124, steering.log()[-3000:]  # timeout's own status: the command was stopped
    steering.assert_stopped_and_cancelled(ids, "SIGTERM")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP],
                         ids=["SIGTERM", "SIGINT", "SIGHUP"])
def test_the_emulate_wrapper_passes_a_signal_on_and_waits(workflow, tmp_path: Path, signum: int) -> None:
    steering = Steering(workflow, tmp_path, "lsf")
    wrapper = steering.start(start_new_session=True)
    ids = steering.wait_for_queue()
    wrapper.send_signal(signum)  # the wrapper alone, as `kill PID` does
    assert stop(wrapper) == 128 + signum, steering.log()[-3000:]  # it waited for the run, and says how it ended
    steering.assert_stopped_and_cancelled(ids, signal.Signals(signum).name)


def test_a_signal_repeated_while_the_run_cancels_does_not_cut_the_cancelling_short(workflow, tmp_path: Path) -> None:
    """A CI runner that signals the process group, then again: the first signal stops the run, the others only
    say that it is stopping."""
    steering = Steering(workflow, tmp_path, "htcondor")
    process = steering.start(start_new_session=True)
    ids = steering.wait_for_queue()
    for _ in range(8):
        os.killpg(process.pid, signal.SIGTERM)
        time.sleep(0.1)
    # 143, or a SIGTERM that came after process() had stopped and put the default handler back: a shell shows 143
    assert stop(process) in (128 + signal.SIGTERM, -signal.SIGTERM), steering.log()[-3000:]
    steering.assert_stopped_and_cancelled(ids, "SIGTERM")
    assert "SIGTERM: the run is already stopping; its jobs are being cancelled" in steering.log()


def test_a_parent_shell_whose_terminal_goes_away_cancels_the_jobs(workflow, tmp_path: Path) -> None:
    """The run in the foreground of a shell in a terminal (ssh, a terminal window) that is closed: the kernel
    sends SIGHUP to the foreground process group."""
    steering = Steering(workflow, tmp_path, "lsf")
    line = (f"cd {shlex.quote(str(steering.flow.folder))} && {shlex.join(steering.command())} "
            f"2>{shlex.quote(str(steering.stderr))}")
    pid, terminal = pty.fork()
    if pid == 0:  # the child: a shell in a new session whose terminal is the pty
        os.execve("/bin/bash", ["bash", "-c", line], steering.env)
    try:
        steering.stderr.touch()
        ids = steering.wait_for_queue()
    finally:
        os.close(terminal)  # the terminal goes away: SIGHUP
    wait_for(lambda: os.waitpid(pid, os.WNOHANG)[0] == pid, 90, "the shell to end")
    wait_for(lambda: "Result: stopped by" in steering.log(), 90, "the run's summary")
    steering.assert_stopped_and_cancelled(ids, "SIGHUP")


@pytest.mark.slurm
@pytest.mark.slow
@pytest.mark.parametrize("how", ["timeout", "SIGHUP"])
def test_a_stopped_run_cancels_its_real_slurm_jobs(slurm, workflow, tmp_path: Path, how: str) -> None:  # noqa: F811
    steering = Steering(workflow, tmp_path, "slurm")
    process = steering.start(*(["timeout", "40"] if how == "timeout" else []), start_new_session=True)
    ids = steering.wait_for_queue()
    assert steering.live_jobs(ids), "the jobs must be in Slurm's queue before the stop"
    if how == "SIGHUP":
        process.send_signal(signal.SIGHUP)
    assert stop(process) == (124 if how == "timeout" else 128 + signal.SIGHUP), steering.log()[-3000:]
    steering.assert_stopped_and_cancelled(ids, "SIGTERM" if how == "timeout" else "SIGHUP")


def test_a_run_started_under_nohup_goes_on_after_sighup(workflow, tmp_path: Path) -> None:
    """``nohup python workflow.py --batch &``: SIGHUP is ignored from the start, so a closed terminal does not
    stop the run."""
    flow = workflow("batch.py")
    def as_nohup() -> None:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    with open(tmp_path / "steering.stderr", "w") as err:
        process = subprocess.Popen(flow.command("--count", "2", "--sleep", "3"), cwd=flow.folder, env=clean_env(),
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                   start_new_session=True, preexec_fn=as_nohup)
    wait_for(lambda: list((flow.folder / "started").glob("*.pid")), 60, "a part to run")
    process.send_signal(signal.SIGHUP)
    assert stop(process) == 0, (tmp_path / "steering.stderr").read_text()[-3000:]
    assert (flow.folder / "results" / "total.json").exists()
