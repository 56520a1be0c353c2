"""The wrapper of a job whose work can checkpoint, warned by its batch system at any moment: before the work's
process starts, while it starts (before its handler is set), while it works, after it is done. Slurm may send its
``--signal`` warning up to a minute early, so each moment happens on a real cluster (CI saw a job of a one-minute
limit warned in its first seconds end as "killed by SIGUSR1"). The real rendered wrapper runs a small work process
that uses b2batch's own node-side handler (b2batch.engine.preemption)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import clean_env

from b2batch.jobscript import wrapper

#: The work: says it started, waits (``argv[2]`` seconds) before it sets the handler (Python's start, luigi's
#: import), says so, then works until warned; on the warning it saves, and asks to be requeued as a task does.
WORK = """
import os, sys, time
from pathlib import Path
folder = Path(sys.argv[1])
(folder / "work_started").write_text(str(os.getpid()))
time.sleep(float(sys.argv[2]))
from b2batch.engine import preemption
preemption.install(lambda name: (folder / "saved").write_text(name))
(folder / "handler_set").write_text("")
try:
    for _ in range(int(sys.argv[3])):
        time.sleep(0.1)
except preemption.Checkpointed as stop:
    sys.exit(preemption.ask_for_requeue(folder, stop.signal_name + " saved"))
preemption.stand_down()
(folder / "work_done").write_text("")
time.sleep(float(sys.argv[4]))
"""


def _job(folder: Path, before_handler: float = 0.0, steps: int = 300, after: float = 0.0,
         env_script: str | None = None, shell: str = "bash") -> subprocess.Popen[bytes]:
    (folder / "work.py").write_text(WORK)
    script = None
    if env_script is not None:
        script = folder / "env.sh"
        script.write_text(env_script)
    values = ("Warned()", str(folder / "logs"), str(folder / "logs" / "stdout"), str(folder / "logs" / "stderr"),
              str(folder / "exit_code"), str(folder / "setup_failed"))
    command = [sys.executable, str(folder / "work.py"), str(folder), str(before_handler), str(steps), str(after)]
    text = wrapper._render(shell, values, script and str(script), (), str(folder), None, command, True)
    (folder / "wrapper.sh").write_text(text)
    return subprocess.Popen([shell, str(folder / "wrapper.sh")], env=clean_env(), stdin=subprocess.DEVNULL)


def _until(path: Path, job: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while not path.exists():
        assert job.poll() is None, f"the job ended ({job.returncode}) before {path.name}"
        assert time.monotonic() < deadline, f"no {path.name} after 30 s"
        time.sleep(0.005)


def _ended(folder: Path, job: subprocess.Popen[bytes]) -> tuple[int, str, str]:
    code = job.wait(timeout=60)
    marker = folder / "checkpointed"
    recorded = (folder / "exit_code").read_text().strip()
    assert recorded == str(code), (recorded, code, (folder / "logs" / "stderr").read_text())
    return code, marker.read_text().strip() if marker.exists() else "", (folder / "logs" / "stderr").read_text()


@pytest.mark.parametrize("shell", ["bash", "sh"])  # sh: dash here, which has no `source`
@pytest.mark.parametrize("name", ["SIGUSR1", "SIGUSR2"])
def test_a_warning_before_the_works_process_starts_requeues_the_job_without_starting_it(tmp_path: Path,
                                                                                         name: str, shell: str) -> None:
    # the warning comes while the wrapper sources env_script: it does not count as a failed set-up
    job = _job(tmp_path, env_script=f"kill -{name[3:]} $$\nsleep 0.2\n", shell=shell)
    code, marker, stderr = _ended(tmp_path, job)
    assert (code, marker) == (75, f"{name} before the task began"), stderr
    assert not (tmp_path / "work_started").exists() and not (tmp_path / "setup_failed").exists()


@pytest.mark.parametrize("shell", ["bash", "sh"])
@pytest.mark.parametrize("name", ["SIGUSR1", "SIGUSR2"])
def test_a_warning_while_the_works_process_starts_requeues_the_job(tmp_path: Path, name: str, shell: str) -> None:
    job = _job(tmp_path, before_handler=3.0, shell=shell)
    _until(tmp_path / "work_started", job)
    job.send_signal(getattr(signal, name))
    code, marker, stderr = _ended(tmp_path, job)
    assert (code, marker) == (75, f"{name} before the task began"), stderr  # not "killed by SIGUSR1"
    assert not (tmp_path / "handler_set").exists() and not (tmp_path / "saved").exists()


def test_a_warning_while_the_work_runs_saves_its_checkpoint_and_requeues_the_job(tmp_path: Path) -> None:
    job = _job(tmp_path)
    _until(tmp_path / "handler_set", job)
    job.send_signal(signal.SIGUSR2)  # SGE's -notify: passed on to the work as SIGUSR1
    code, marker, stderr = _ended(tmp_path, job)
    assert (code, marker) == (75, "SIGUSR1 saved"), stderr
    assert (tmp_path / "saved").read_text() == "SIGUSR1"


def test_a_warning_after_the_work_is_done_leaves_its_outcome(tmp_path: Path) -> None:
    job = _job(tmp_path, steps=1, after=1.0)
    _until(tmp_path / "work_done", job)
    job.send_signal(signal.SIGUSR1)
    code, marker, stderr = _ended(tmp_path, job)
    assert (code, marker) == (0, ""), stderr
    assert not (tmp_path / "saved").exists()
