"""A run without --batch goes through the engine, in local pilots (issue 44; the setting local_runs_on_engine),
and keeps what a luigi user sees: luigi's execution summary, the exit status, --workers (the number of pilots),
a failed task's traceback on the terminal, and the tasks' event handlers firing in the script's own process."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from conftest import clean_env

SCRIPT = '''
import os
import time
import luigi
import b2batch

EVENTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "events.txt")


class Leaf(b2batch.Task):
    n = b2batch.IntParameter()

    def output(self):
        yield self.add_to_output("leaf.txt")

    def run(self):  # writes its output directly (no on_temporary_files)
        if self.n == int(os.environ.get("FAIL_N", "-1")):
            raise ValueError(f"leaf {self.n} is broken")
        with open(self.get_output_file_name("leaf.txt"), "w") as f:
            f.write("partial ")
            f.flush()
            if self.n == int(os.environ.get("HANG_N", "-1")):
                open(os.path.join(os.path.dirname(EVENTS), "writing"), "w").close()
                time.sleep(300)
            f.write(str(os.getpid()))


class Sum(b2batch.Task):
    def requires(self):
        return [Leaf(n=n) for n in range(6)]

    def output(self):
        yield self.add_to_output("sum.txt")

    def run(self):
        with open(self.get_output_file_name("sum.txt"), "w") as f:
            f.write("sum")


def note(event, task, detail=""):
    with open(EVENTS, "a") as f:
        f.write(f"{os.getpid()} {event} {task.task_id} {detail}".rstrip() + "\\n")


@b2batch.Task.event_handler(luigi.Event.START)
def started(task):
    note("START", task)


@b2batch.Task.event_handler(luigi.Event.SUCCESS)
def succeeded(task):
    note("SUCCESS", task)


@b2batch.Task.event_handler(luigi.Event.FAILURE)
def failed(task, exception):
    note("FAILURE", task, repr(str(exception).splitlines()[-1] if str(exception) else exception))


if __name__ == "__main__":
    print("steering pid", os.getpid(), flush=True)
    b2batch.process(Sum())
'''


def run(folder: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    (folder / "flow.py").write_text(SCRIPT)
    if not (folder / "settings.json").exists():  # the default, named so that these tests keep the engine path
        (folder / "settings.json").write_text(json.dumps({"local_runs_on_engine": True}))
    return subprocess.run([sys.executable, "flow.py", *args], cwd=folder, env=clean_env(**env),
                          capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)


def events(folder: Path) -> list[tuple[int, str, str]]:
    lines = (folder / "events.txt").read_text().splitlines()
    return [(int(pid), event, rest) for pid, event, rest in (line.split(" ", 2) for line in lines)]


def report(folder: Path) -> dict:
    reports = list((folder / "logs").glob("b2batch-run-*.report.json"))
    assert len(reports) == 1, reports
    return json.loads(reports[0].read_text())


def test_a_local_run_goes_through_local_pilots_and_fires_each_tasks_events_in_the_script(tmp_path: Path) -> None:
    done = run(tmp_path, "--workers", "2")
    assert done.returncode == 0, done.stderr[-3000:]
    steering = int(done.stdout.split("steering pid ")[1].split()[0])
    assert "===== Luigi Execution Summary =====" in done.stderr
    assert "* 7 ran successfully" in done.stderr, done.stderr[-3000:]
    # the engine ran them: the run's record became a report, its tasks ran in local pilots, at most --workers
    # of them per task family
    record = report(tmp_path)
    assert record["mode"] == "local-jobs" and record["exit_status"] == 0
    assert sorted(job["system"] for job in record["jobs"]) == ["local-pilots"] * 7, record["jobs"]
    pilots = [job for job in record["worker_jobs"] if job["kind"] == "pilot"]
    assert sum(job["units"] for job in pilots) == 7, pilots
    assert max(sum(1 for job in pilots if job["family"] == family) for family in ("Leaf", "Sum")) <= 2, pilots
    leaf_pids = {int(p.read_text().split()[-1]) for p in tmp_path.glob("results/n=*/leaf.txt")}
    assert len(list(tmp_path.glob("results/n=*/leaf.txt"))) == 6 and steering not in leaf_pids
    # each task's START and SUCCESS fired once, in the script's own process
    seen = events(tmp_path)
    assert {pid for pid, _event, _rest in seen} == {steering}, seen
    for event in ("START", "SUCCESS"):
        fired = sorted(rest for _pid, e, rest in seen if e == event)
        assert len(fired) == 7 and len(set(fired)) == 7, seen


def test_a_failed_task_shows_its_traceback_fires_failure_here_and_the_run_exits_1(tmp_path: Path) -> None:
    done = run(tmp_path, "--workers", "2", FAIL_N="3")
    assert done.returncode == 1, done.stderr[-3000:]
    steering = int(done.stdout.split("steering pid ")[1].split()[0])
    assert "Traceback (most recent call last)" in done.stderr and "ValueError: leaf 3 is broken" in done.stderr
    assert "* 1 failed:" in done.stderr and "This progress looks :( because there were failed tasks" in done.stderr
    failures = [(pid, rest) for pid, event, rest in events(tmp_path) if event == "FAILURE"]
    assert len(failures) == 1 and failures[0][0] == steering, failures
    assert "Leaf" in failures[0][1] and "leaf 3 is broken" in failures[0][1]
    # unit_logs auto: the tasks wrote into their pilots' logs (no log folder per task); the failure names the
    # file and the bytes of the task's part, and quotes the end of that part alone
    assert not list((tmp_path / "logs").glob("n=*")), sorted(p.name for p in (tmp_path / "logs").iterdir())
    part = re.search(r"^stderr: (\S+) \(its part: bytes (\d+) to (\d+)\)$", done.stderr, re.M)
    assert part, done.stderr[-3000:]
    text = Path(part[1]).read_bytes()[int(part[2]):int(part[3])].decode()
    assert text.startswith("b2batch: Leaf(n=3) started in job ") and "ValueError: leaf 3 is broken" in text, text
    failed = [job for job in report(tmp_path)["jobs"] if job["state"] == "failed"]
    assert [Path(job["stderr"]) for job in failed] == [Path(part[1])], failed  # the report names that file too
    quoted = done.stderr.split("Last lines of stderr:")[1]
    assert "Leaf(n=3)" in quoted and not re.search(r"Leaf\(n=[0-245]\)", quoted.split("Luigi Execution")[0])


def test_with_unit_logs_own_each_task_has_its_log_files(tmp_path: Path) -> None:
    (tmp_path / "settings.json").write_text(json.dumps({"local_runs_on_engine": True, "unit_logs": "own"}))
    done = run(tmp_path, "--workers", "2", FAIL_N="3")
    assert done.returncode == 1, done.stderr[-3000:]
    assert "ValueError: leaf 3 is broken" in (tmp_path / "logs" / "n=3" / "Leaf" / "stderr").read_text()
    assert (tmp_path / "logs" / "n=0" / "Leaf" / "stdout").read_text().startswith("b2batch: Leaf(n=0) started")
    assert f"stderr: {tmp_path / 'logs' / 'n=3' / 'Leaf' / 'stderr'}\n" in done.stderr


def test_with_the_setting_off_luigis_worker_runs_them_in_this_process(tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"local_runs_on_engine": False}))
    done = run(tmp_path, B2BATCH_SETTINGS=str(settings))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "7 task(s) in this process" in done.stderr and "local-pilots" not in done.stderr
    assert not list((tmp_path / "logs").glob("b2batch-run-*.report.json"))


def processes_of(folder: Path) -> list[psutil.Process]:
    """The processes whose command line names a file under ``folder`` (the run's pilots and their units)."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        if any(str(folder) in arg for arg in process.info["cmdline"] or ()):
            found.append(process)
    return found


@pytest.mark.slow
def test_a_killed_run_leaves_no_pilot_running_and_the_rerun_redoes_the_half_written_task(tmp_path: Path) -> None:
    """SIGKILL of the script (not of its pilots, which run in sessions of their own): its local pilots stop the
    task they run and end, as luigi's worker processes would go with the run, and the rerun redoes the task that
    was writing its output directly, not taking the half it left for complete nor following a pilot of the
    killed run (a rerun that followed it waited for its task to end: the hang of 9bd4d23)."""
    (tmp_path / "flow.py").write_text(SCRIPT)
    (tmp_path / "settings.json").write_text(json.dumps({"local_runs_on_engine": True}))
    steering = subprocess.Popen([sys.executable, "flow.py", "--workers", "1"], cwd=tmp_path,
                                env=clean_env(HANG_N="2"), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "writing").exists() and time.monotonic() < deadline:
            assert steering.poll() is None, "the run ended before Leaf(n=2) wrote"
            time.sleep(0.1)
        assert (tmp_path / "writing").exists(), "Leaf(n=2) did not start writing"
        steering.kill()
        steering.wait(timeout=30)
        deadline = time.monotonic() + 60  # the pilot looks at its steering process every 0.5 s
        while processes_of(tmp_path) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = [" ".join(p.cmdline()) for p in processes_of(tmp_path) if p.is_running()]
        assert not left, left
    finally:
        steering.kill()
        for process in processes_of(tmp_path):
            process.kill()
    assert (tmp_path / "results" / "n=2" / "leaf.txt").read_text() == "partial "  # what the stopped task left
    rerun = run(tmp_path, "--workers", "1")
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "its outputs may be partial and do not count: removed" in rerun.stderr, rerun.stderr[:1500]
    assert "* 4 ran successfully" in rerun.stderr, rerun.stderr[-3000:]  # Leaf(n=2) again, the two after it, Sum
    assert (tmp_path / "results" / "n=2" / "leaf.txt").read_text().split()[-1].isdigit()


CRASH = '''
import os
import signal
import sys

import b2batch


class Crash(b2batch.Task):
    def output(self):
        yield self.add_to_output("crash.txt")

    @b2batch.dispatch
    def run(self):
        print("the child says hi", file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGSEGV)


if __name__ == "__main__":
    b2batch.process(Crash())
'''


def test_a_dispatched_run_that_crashes_in_a_local_pilot_names_its_part_of_the_pilots_logs(tmp_path: Path) -> None:
    """unit_logs auto: the dispatched child writes into its pilot's logs too; its error does not name the task's
    own log files (there are none), the run's failure names the part, which holds the child's output."""
    (tmp_path / "crash.py").write_text(CRASH)
    done = subprocess.run([sys.executable, "crash.py"], cwd=tmp_path, env=clean_env(), capture_output=True, text=True,
                          timeout=180, stdin=subprocess.DEVNULL)
    assert done.returncode == 1, done.stderr[-3000:]
    said = "the dispatched run() was killed by signal 11 (SIGSEGV); its output is in the job's log files."
    assert said in done.stderr, done.stderr[-3000:]
    part = re.search(r"^stderr: (\S+) \(its part: bytes (\d+) to (\d+)\)$", done.stderr, re.M)
    assert part, done.stderr[-3000:]
    assert "the child says hi" in Path(part[1]).read_bytes()[int(part[2]):int(part[3])].decode()
    assert not (tmp_path / "logs" / "Crash").exists()
