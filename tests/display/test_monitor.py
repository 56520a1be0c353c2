"""``b2batch monitor`` and the live state it reads: the steering process writes it at most once a second and
only when something changed; the monitor, in a real terminal (tmux), follows a real batch run's counts, shows a
running task's stdout and a failed task's stderr on a key, says when the run ended, and quits on ``q``."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import clean_env, wait_for

from b2batch.engine.jobconfig import NO_SETTINGS
from b2batch.display import livefiles
from b2batch.engine import Job, JobFiles, RunRecord
from b2batch.engine.livestate import MAX_INTERVAL, LiveState

BATCH = ("--batch", "--batch-system", "local")


def _job(key: str, folder: Path) -> Job:
    return Job(key=key, name=key, family="Fam", system="local", params={"k": key}, config=NO_SETTINGS,
               files=JobFiles.at(folder, "Fam", key, folder / "logs" / key))


def test_the_live_state_is_written_at_most_once_a_second_and_not_when_nothing_changed(tmp_path: Path) -> None:
    record = RunRecord()
    path = tmp_path / "b2batch-live-x.json"
    writer = LiveState(record, path, {"front_end": "test"}).start()
    started = time.monotonic()
    n = 0
    while time.monotonic() - started < 3.0:  # a change every millisecond for 3 s
        job = _job(f"j{n}", tmp_path)
        record.update(job, "running")
        record.update(job, "done")
        n += 1
        time.sleep(0.001)
    during = json.loads(path.read_text())
    # The last changes are written within a second, or later (at most MAX_INTERVAL after the write before) when
    # a write is dear against the process's own CPU time (CPU_SHARE): an idle test process makes every write dear.
    time.sleep(MAX_INTERVAL + 0.5)
    busy = time.monotonic() - started
    written = writer.writes
    time.sleep(1.6)  # nothing changes: nothing is written (the heartbeat is 30 s away)
    assert writer.writes == written
    writer.stop("success")
    final = json.loads(path.read_text())
    assert n > 500
    # The first write at start, then one per second at most.
    assert 3 <= written <= busy / 1.0 + 2, (written, busy)
    assert during["counts"]["Fam"]["local"]["done"] < n and not during["ended"]
    assert final["ended"] and final["result"] == "success" and final["counts"]["Fam"]["local"]["done"] == n
    assert final["writes"] == written + 1


def tmux(sock: str, *args: str, env: dict[str, str] | None = None) -> str:
    return subprocess.run(["tmux", "-L", sock, "-f", "/dev/null", *args], check=True, capture_output=True,
                          text=True, env=env).stdout


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_the_monitor_follows_a_real_run_in_a_terminal(workflow, tmp_path: Path) -> None:
    """From another terminal: counts change as tasks end, the running tasks with their node and age, ``l``
    shows a running task's stdout, the end of the run is said with its result, ``e`` shows the failed
    task's stderr, ``q`` quits (exit status 0)."""
    flow = workflow("monitored.py")
    paged = tmp_path / "paged.txt"  # the "pager" copies the log it is given
    env = clean_env(TERM="xterm-256color", MONITORED_FOLDER=str(flow.folder),
                    PAGER="sh -c " + shlex.quote('cp "$0" ' + shlex.quote(str(paged))))
    env.pop("COLUMNS", None)
    env.pop("LINES", None)
    started = time.monotonic()
    steering = subprocess.Popen(flow.command(*BATCH), cwd=flow.folder, env=env, stdout=subprocess.DEVNULL,
                                stderr=open(tmp_path / "steering.log", "w"))
    sock = f"b2batch-monitor-{os.getpid()}"
    try:
        wait_for(lambda: list((flow.folder / "logs").glob("b2batch-live-*.json")), 60, "the live state")
        tmux(sock, "new-session", "-d", "-x", "100", "-y", "30", "-c", str(flow.folder), "bash --norc --noprofile",
             env=env)

        def screen() -> str:
            return tmux(sock, "capture-pane", "-p")

        monitor = shlex.join([sys.executable, "-m", "b2batch", "monitor", str(flow.script)])
        tmux(sock, "send-keys", f"{monitor}; echo EXIT=$?", "Enter")
        def counts(*numbers: str) -> re.Pattern[str]:  # Held's row: wait, sub, queue, run, done, fail
            return re.compile(r"^ Held +" + " +".join(numbers) + " ", re.M)

        def showing(*patterns: re.Pattern[str]) -> Callable[[], str | None]:  # one capture with all of them:
            def shown() -> str | None:  # (a capture taken while the monitor redraws has only its top part)
                text = screen()
                return text if all(pattern.search(text) for pattern in patterns) else None
            return shown

        # Within 25 s: the live state follows changes, not only its heartbeat (30 s); with the running tasks'
        # node and age.
        running_row = re.compile(rf"^ Held\(n=\d\) +\S+ +{re.escape(socket.gethostname())} +0:00:\d\d", re.M)
        first = wait_for(showing(counts("·", "·", "·", "4", "·", "·"), running_row), 25, "4 running tasks")
        (flow.folder / "go-0").touch()
        wait_for(lambda: counts("·", "·", "·", "3", "1", "·").search(screen()), 25, "3 running, 1 done")
        second = screen()
        tmux(sock, "send-keys", "l")
        wait_for(lambda: re.search(r"^stdout:", screen(), re.M), 60, "the log view")  # its path may wrap
        log_view = screen()
        tmux(sock, "send-keys", "p")
        wait_for(lambda: paged.exists() and "is working" in paged.read_text(), 60, "the log in the pager")
        wait_for(lambda: re.search(r"^stdout:", screen(), re.M), 60, "the log view after the pager")
        tmux(sock, "send-keys", "b")
        wait_for(lambda: "Running (3)" in screen(), 60, "the view again")
        for n in (1, 2, 3):
            (flow.folder / f"go-{n}").touch()
        assert steering.wait(120) == 1  # task 3 failed
        elapsed = time.monotonic() - started
        wait_for(lambda: "Run ENDED" in screen(), 30, "the monitor to say the run ended")
        ended = screen()
        tmux(sock, "send-keys", "e")
        wait_for(lambda: re.search(r"^stderr:", screen(), re.M), 60, "the failed task's stderr")
        stderr_view = screen()
        tmux(sock, "send-keys", "q")
        wait_for(lambda: re.search(r"^EXIT=\d+", screen(), re.M), 60, "the monitor to quit")
        after = screen()
    finally:
        if steering.poll() is None:
            steering.kill()
        subprocess.run(["tmux", "-L", sock, "kill-server"], check=False, capture_output=True)
    assert "running; updated" in first and "Running (4)" in first, first
    host = socket.gethostname()
    assert re.search(rf"^ Held\(n=\d\) +\S+ +{re.escape(host)} +0:00:\d\d", first, re.M), first  # node and age
    assert "running; updated" in second, second
    assert re.search(r"^task \d is working", log_view, re.M), log_view
    assert re.search(r"^stdout:\s+\S+/logs/n=\d/Held/stdout$", log_view, re.M), log_view  # wrapped when long
    assert re.search(r"Run ENDED at \d\d:\d\d:\d\d: 1 task\(s\) failed", ended), ended
    assert "Tasks on local" in ended and counts("·", "·", "·", "·", "3", "1").search(ended), ended
    assert "Failed (1)" in ended and "Held(n=3)" in ended, ended
    assert "task 3 breaks on purpose" in stderr_view, stderr_view
    assert "EXIT=0" in after, after
    state = json.loads(next((flow.folder / "logs").glob("b2batch-live-*.json")).read_text())
    assert state["ended"] and state["result"] == "1 task(s) failed"
    assert state["writes"] <= elapsed + 2, (state["writes"], elapsed)  # at most one write a second
    assert livefiles.LiveRun(Path("x"), state).live is False


NESTED = """
import time
from joblib import Parallel, delayed, parallel_config
import b2batch.joblib

def inner(i):
    time.sleep(0.2)
    return i

def outer(k):
    return sum(Parallel(n_jobs=2)(delayed(inner)(i) for i in range(3)))

if __name__ == "__main__":
    with parallel_config(backend="b2batch", batch_system="local", export_metadata=True, throttle=[3, 2],
                         max_recursion_level=1):
        print(Parallel(n_jobs=-1)(delayed(outer)(k) for k in range(2)))
"""


@pytest.mark.slow
def test_joblib_export_metadata_shows_nested_calls_per_level_with_their_throttles(tmp_path: Path) -> None:
    (tmp_path / "nested.py").write_text(NESTED)
    done = subprocess.run([sys.executable, "nested.py"], cwd=tmp_path, env=clean_env(), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0 and "[3, 3]" in done.stdout, done.stderr[-3000:]
    states = sorted((tmp_path / "logs" / "joblib").glob("b2batch-live-*.json"))
    assert [p.stem[-2:] for p in states].count("l1") == 2 and len(states) == 3, states
    shown = subprocess.run([sys.executable, "-m", "b2batch", "monitor", "logs", "--once"], cwd=tmp_path,
                           env=clean_env(COLUMNS="100"), capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert "b2batch monitor: joblib nested.py" in text and "Run ENDED" in text and ": success" in text, text
    assert "joblib calls per level" in text, text
    # level, calls, live, done, running, queued, failed, total, throttle
    assert re.search(r"^ +0 +1 +0 +2 +0 +0 +0 +2 +3 *$", text, re.M), text
    assert re.search(r"^ +1 +2 +0 +6 +0 +0 +0 +6 +2 *$", text, re.M), text


@pytest.mark.slow
def test_b2luigi_progress_tui_turns_the_live_state_on(tmp_path: Path) -> None:
    """b2luigi's profile writes no live state unless progress_tui asks for it; with it, the command to follow
    the run is printed."""
    script = tmp_path / "tui.py"
    script.write_text(
        "import sys\nimport b2luigi\n\n"
        "class One(b2luigi.Task):\n"
        "    def output(self):\n        yield self.add_to_output('one.txt')\n"
        "    def run(self):\n        open(self.get_output_file_name('one.txt'), 'w').write('1')\n\n"
        "if __name__ == '__main__':\n"
        "    b2luigi.set_setting('batch_system', 'local')\n"
        "    b2luigi.process(One(), batch=True, progress_tui='--tui' in sys.argv, "
        "ignore_additional_command_line_args=True)\n")
    for folder in ("plain", "tui"):
        (tmp_path / folder).mkdir()
        shutil.copy(script, tmp_path / folder)
    plain = subprocess.run([sys.executable, "tui.py"], cwd=tmp_path / "plain", env=clean_env(), capture_output=True,
                           text=True, timeout=300)
    assert plain.returncode == 0, plain.stderr[-3000:]
    assert not list(tmp_path.rglob("b2batch-live-*.json")) and "b2batch monitor" not in plain.stderr
    tui = subprocess.run([sys.executable, "tui.py", "--tui"], cwd=tmp_path / "tui", env=clean_env(),
                         capture_output=True, text=True, timeout=300)
    assert tui.returncode == 0, tui.stderr[-3000:]
    states = list(tmp_path.rglob("b2batch-live-*.json"))
    assert len(states) == 1, tui.stderr[-3000:]
    assert f"follow this run from any terminal with: b2batch monitor {states[0].parent}" in tui.stderr
    state = json.loads(states[0].read_text())
    assert state["ended"] and state["result"] == "success" and state["front_end"] == "luigi", state


def test_a_farm_of_pilots_writes_its_lines_per_state(tmp_path: Path) -> None:
    (tmp_path / "lines.txt").write_text("echo a\nfalse\necho c\n")
    done = subprocess.run([sys.executable, "-m", "b2batch", "farm", "lines.txt", "--batch-system", "local", "--jobs",
                           "2"], cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    states = list((tmp_path / "lines.txt_workdir" / "b2batch").glob("b2batch-live-*.json"))
    assert len(states) == 1, done.stdout
    state = json.loads(states[0].read_text())
    assert state["front_end"] == "farm" and state["ended"] and state["result"] == "1 line(s) failed", state
    assert {k: state["farm"][k] for k in ("toprocess", "finished", "failed")} == {"toprocess": 0, "finished": 2,
                                                                                 "failed": 1}, state
    shown = subprocess.run([sys.executable, "-m", "b2batch", "monitor", "lines.txt_workdir", "--once"], cwd=tmp_path,
                           env=clean_env(), capture_output=True, text=True, timeout=60)
    assert "Farm lines: 0 toprocess, 2 finished, 1 failed" in shown.stdout, shown.stdout


def test_a_pool_writes_its_live_state_in_its_work_dir(tmp_path: Path) -> None:
    import b2batch

    with b2batch.Pool(2, batch_system="local", work_dir=tmp_path / "work", keep_work_dir=True) as pool:
        assert pool.map(abs, [-1, -2, -3]) == [1, 2, 3]
        states = list(pool.work_dir.glob("logs/b2batch-live-*.json"))
        assert len(states) == 1
        during = json.loads(states[0].read_text())
        assert during["front_end"] == "pool" and not during["ended"]
    state = json.loads(states[0].read_text())
    assert state["ended"] and state["result"] == "success", state
    assert sum(row.get("done", 0) for systems in state["counts"].values() for row in systems.values()) >= 1, state
    run = livefiles.choose(livefiles.read_all(livefiles.candidates(tmp_path / "work")))
    assert run is not None and run.path == states[0]


def test_a_run_whose_steering_process_was_killed_is_shown_as_gone(tmp_path: Path) -> None:
    from rich.console import Console

    from b2batch.display.live_view import Monitor

    dead = subprocess.Popen(["true"])
    dead.wait()
    now = time.time()
    base = {"format": 1, "front_end": "luigi", "script": "flow.py", "argv": [], "started_at": now - 60,
            "updated_at": now - 5, "ended": False, "counts": {"A": {"local": {"running": 1}}}, "running": [],
            "failures": []}
    (tmp_path / "b2batch-live-1-a.json").write_text(json.dumps({**base, "host": socket.gethostname(),
                                                                "pid": dead.pid}))
    killed = livefiles.read_all(livefiles.candidates(tmp_path))[0]
    assert killed.gone() and not killed.live
    console = Console(width=100, height=30, record=True)
    monitor = Monitor(tmp_path, console)
    monitor.refresh()
    console.print(monitor.view())
    assert f"its steering process ({dead.pid} on {socket.gethostname()}) is gone" in console.export_text()
    # Another host: alive while its heartbeat (30 s) is recent, gone after three missed ones.
    elsewhere = livefiles.LiveRun(tmp_path / "x", {**base, "host": "another-node", "pid": 1})
    assert elsewhere.live
    elsewhere.state["updated_at"] = now - 100
    assert elsewhere.gone()
    mine = livefiles.LiveRun(tmp_path / "y", {**base, "host": socket.gethostname(), "pid": os.getpid(),
                                              "started_at": time.time()})
    assert mine.live
