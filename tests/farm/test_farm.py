"""``b2batch farm`` on local cores: PyTaskFarmer's files and options, restarts, farmers sharing a list, signals,
the timeout, runners and task-list handlers, and clear errors for bad input."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from conftest import clean_env, wait_for
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from b2batch.farm.runners import ContainerRunner, ShellRunner
from b2batch.farm.tasklist import read_tasks
from b2batch.farm.workdir import WorkDir, lock_path

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def env_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return clean_env(HOME=str(home), **extra)


def farm(tmp_path: Path, *args: str, timeout: float = 120, env: dict[str, str] | None = None,
         command: tuple[str, ...] = ("-m", "b2batch.farm")) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *command, *args], cwd=tmp_path, env=env or env_for(tmp_path),
                          capture_output=True, text=True, check=False, timeout=timeout, stdin=subprocess.DEVNULL)


def popen_farm(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "b2batch.farm", *args], cwd=tmp_path, env=env_for(tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)


def write_list(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


def ids_in(path: Path) -> list[int]:
    return [int(line.split(" ", 1)[0]) for line in path.read_text().splitlines()] if path.exists() else []


def marks(path: Path) -> list[list[str]]:
    return [line.split() for line in path.read_text().splitlines()] if path.exists() else []


# --- PyTaskFarmer's files and options -------------------------------------------------------------------------

def test_files_equal_pytaskfarmers(tmp_path: Path) -> None:
    """The golden work dir was written by the real PyTaskFarmer 0.1.0 from the same list."""
    recorded = GOLDEN / "farm_pytaskfarmer"
    shutil.copy(recorded / "tasks.txt", tmp_path / "tasks.txt")
    done = farm(tmp_path, "tasks.txt", "--proc", "2")
    assert done.returncode == 0, done.stderr  # failed lines do not change the exit code
    work = tmp_path / "tasks.txt_workdir"
    for name in ("finished", "failed"):
        assert sorted((work / name).read_text().splitlines()) == (recorded / name).read_text().splitlines(), name
    assert (work / "toprocess").read_text() == (recorded / "toprocess").read_text() == ""
    assert sorted(p.name for p in (work / "logs").iterdir()) == sorted(p.name for p in (recorded / "logs").iterdir())
    for log in (recorded / "logs").iterdir():
        assert (work / "logs" / log.name).read_text() == log.read_text(), log.name
    assert (work / "lock").exists()
    events = json.loads((work / "timeline.json").read_text())
    assert sorted(e["name"] for e in events) == sorted(read_tasks(recorded / "tasks.txt"))
    assert "Found 5 total tasks" in done.stdout and "Finished working" in done.stdout


def test_pytaskfarmer_command_line_is_accepted(tmp_path: Path) -> None:
    write_list(tmp_path / "t.txt", ["echo $PROC_NUMBER", "echo b"])
    code = "import sys; from b2batch.farm.command_line import pytaskfarmer_main; sys.exit(pytaskfarmer_main())"
    done = farm(tmp_path, "t.txt", "-n", "2", "-v", "True", "-w", "wd", "-r", "default", "-t", "default",
                "--timeout", "60", command=("-c", code))
    assert done.returncode == 0, done.stderr
    assert "Executing task 0 : echo $PROC_NUMBER" in done.stdout and "Completed task 1" in done.stdout
    assert sorted(ids_in(tmp_path / "wd" / "finished")) == [0, 1]
    assert (tmp_path / "wd" / "logs" / "log_0").read_text() == "0\n"
    assert "Failed lines" not in done.stdout  # pytaskfarmer.py prints what PyTaskFarmer prints


def test_b2batch_farm_subcommand(tmp_path: Path) -> None:
    write_list(tmp_path / "t.txt", ["true"])
    done = subprocess.run([sys.executable, "-m", "b2batch", "farm", "t.txt", "--proc", "1"], cwd=tmp_path,
                          env=env_for(tmp_path), capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 0, done.stderr
    assert ids_in(tmp_path / "t.txt_workdir" / "finished") == [0]


def test_each_line_runs_in_a_shell_or_split_like_pytaskfarmer(tmp_path: Path) -> None:
    write_list(tmp_path / "t.txt", ["echo $PROC_NUMBER | tr 0-9 a-j > out_$PROC_NUMBER && echo ok",
                                    "cd / && pwd", "echo $HOME"])
    assert farm(tmp_path, "t.txt", "--proc", "2").returncode == 0
    assert (tmp_path / "out_0").read_text() == "a\n"
    logs = tmp_path / "t.txt_workdir" / "logs"
    assert logs.joinpath("log_0").read_text() == "ok\n" and logs.joinpath("log_1").read_text() == "/\n"
    assert logs.joinpath("log_2").read_text() == str(tmp_path / "home") + "\n"
    # PyTaskFarmer's own way: the line split on spaces, no shell.
    assert farm(tmp_path, "t.txt", "--runner", "split", "--workdir", "split").returncode == 0
    assert (tmp_path / "split" / "logs" / "log_2").read_text() == "$HOME\n"


def test_simple_lines_run_without_a_shell_with_the_same_result() -> None:
    runner = ShellRunner()
    assert runner.launch(0, "true").argv == ["true"]
    assert runner.launch(0, "true").executable == shutil.which("true"), "found once: not searched on PATH per line"
    assert runner.launch(0, "echo x").executable is None  # a shell line: the shell's own path
    assert runner.launch(0, "ls -l /tmp").argv == ["ls", "-l", "/tmp"]  # argv[0] as the shell passes it
    assert runner.launch(0, "no-such-program-x 1").argv == ["/bin/sh", "-c", "no-such-program-x 1"]
    for line in ("echo -e a", "exit 3", "ls $HOME", "ls *.txt", "a=1 ls", "ls > x", "cd /tmp", "ls 'a b'"):
        assert runner.launch(0, line).argv == ["/bin/sh", "-c", line], line


# --- restart, sharing, dead farmers ---------------------------------------------------------------------------

def test_restart_after_sigkill_reruns_no_finished_line(tmp_path: Path) -> None:
    lines = [f"echo start {i} >> runs; sleep {0.2 if i < 3 else 2}; echo end {i} >> runs" for i in range(6)]
    write_list(tmp_path / "t.txt", lines)
    work = tmp_path / "t.txt_workdir"
    first = popen_farm(tmp_path, "t.txt", "--proc", "2")

    def running() -> bool:
        noted = [m[0] for m in marks(tmp_path / "runs")]
        return len(ids_in(work / "finished")) >= 3 and noted.count("start") > noted.count("end")

    wait_for(running, 30, "three finished lines and one running")
    first.send_signal(signal.SIGKILL)
    first.wait()
    finished_before = ids_in(work / "finished")
    done = farm(tmp_path, "t.txt", "--proc", "2")
    assert done.returncode == 0, done.stderr
    assert "is gone: putting its" in done.stderr  # the dead farmer's lines went back
    assert sorted(ids_in(work / "finished")) == list(range(6))
    ends = [int(m[1]) for m in marks(tmp_path / "runs") if m[0] == "end"]
    assert sorted(ends) == list(range(6)), ends  # each line ended once: the killed farmer's run was stopped
    starts = [int(m[1]) for m in marks(tmp_path / "runs") if m[0] == "start"]
    for i in finished_before:
        assert starts.count(i) == 1, (i, starts)  # no finished line ran again


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 150), procs=st.tuples(st.integers(1, 3), st.integers(1, 3)))
def test_two_farmers_at_once_run_every_line_exactly_once(tmp_path: Path, n: int, procs: tuple[int, int]) -> None:
    folder = tmp_path / f"case-{n}-{procs[0]}{procs[1]}-{time.monotonic_ns()}"
    folder.mkdir()
    write_list(folder / "t.txt", ["echo $PROC_NUMBER >> runs"] * n)
    farmers = [popen_farm(folder, "t.txt", "--proc", str(p)) for p in procs]
    for farmer in farmers:
        _, err = farmer.communicate(timeout=120)
        assert farmer.returncode == 0, err
    ran = sorted(int(x) for x in (folder / "runs").read_text().split())
    assert ran == list(range(n))
    assert sorted(ids_in(folder / "t.txt_workdir" / "finished")) == list(range(n))
    assert (folder / "t.txt_workdir" / "toprocess").read_text() == ""


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 40), steps=st.lists(st.tuples(st.sampled_from("ab"), st.sampled_from(["claim", "release",
                                                                                             "finish"]),
                                                      st.integers(1, 5)), max_size=60))
def test_claims_releases_and_results_keep_each_line_in_one_place(tmp_path_factory, n: int, steps) -> None:
    """Interleaved operations of two farmers: a line is waiting, held by one farmer, or done, never two of
    these; and every line is done exactly once in the end."""
    work = WorkDir(tmp_path_factory.mktemp("wd") / "wd")
    tasks = [f"line {i}" for i in range(n)]
    work.prepare(tasks, "list")
    held: dict[str, list[int]] = {"a": [], "b": []}
    for farmer in held:
        work.register(farmer, {})
    for farmer, action, k in steps:
        with work.locked():
            if action == "claim":
                held[farmer] += work.claim_locked(farmer, k)
            elif action == "release":
                back, held[farmer] = held[farmer][:k], held[farmer][k:]
                work.release_locked(farmer, back, tasks)
            else:
                ended, held[farmer] = held[farmer][:k], held[farmer][k:]
                work.finish_locked(farmer, [(i, i % 3) for i in ended], tasks)
        waiting, done = ids_in(work.toprocess), ids_in(work.finished) + ids_in(work.failed)
        everything = waiting + done + held["a"] + held["b"]
        assert sorted(everything) == list(range(n))
        assert work.running() == {"a": set(held["a"]), "b": set(held["b"])}
    for farmer, ids in held.items():
        with work.locked():
            work.finish_locked(farmer, [(i, 0) for i in ids], tasks)
            while ids := work.claim_locked(farmer, 7):
                work.finish_locked(farmer, [(i, 0) for i in ids], tasks)
    assert sorted(ids_in(work.finished) + ids_in(work.failed)) == list(range(n))


def test_dead_farmer_on_another_host_gives_its_lines_back_when_its_heartbeat_is_stale(tmp_path: Path) -> None:
    tasks = [f"t{i}" for i in range(5)]
    work = WorkDir(tmp_path / "wd", heartbeat_timeout=30)
    work.prepare(tasks, "list")
    work.register("elsewhere", {"host": "some-other-node", "pid": 1})
    with work.locked():
        assert work.claim_locked("elsewhere", 2) == [0, 1]
        assert work.recover_locked("me", tasks) == []  # its heartbeat is fresh: it may still run them
    old = time.time() - 60
    os.utime(work.claims / "elsewhere.json", (old, old))
    with work.locked():
        assert sorted(work.recover_locked("me", tasks)) == [0, 1]
    assert sorted(ids_in(work.toprocess)) == list(range(5))
    assert not (work.claims / "elsewhere").exists()


# --- signals and time ---------------------------------------------------------------------------------------

def sleeps_of(pid: int, count: int) -> list[psutil.Process] | None:
    """The ``sleep 60`` processes under ``pid``, once there are ``count`` of them."""
    found = []
    for process in psutil.Process(pid).children(recursive=True):
        try:
            if process.cmdline() == ["sleep", "60"]:
                found.append(process)
        except psutil.Error:  # a line that ended meanwhile
            continue
    return found if len(found) == count else None


@pytest.mark.parametrize("signum", [signal.SIGUSR1, signal.SIGTERM])
def test_signal_puts_running_lines_back(tmp_path: Path, signum: int) -> None:
    write_list(tmp_path / "t.txt", ["true", "sleep 60", "sleep 60", "sleep 60"])
    work = tmp_path / "t.txt_workdir"
    farmer = popen_farm(tmp_path, "t.txt", "--proc", "2")
    wait_for(lambda: ids_in(work / "finished") == [0] and (work / "logs" / "log_2").exists(), 30,
             "two sleeping lines")
    # (line 2's log is opened before its process is started: its sleep may not be running yet)
    sleepers = wait_for(lambda: sleeps_of(farmer.pid, 2), 10, "the two sleeps")
    start = time.monotonic()
    farmer.send_signal(signum)
    out, err = farmer.communicate(timeout=30)
    # PyTaskFarmer exits 1 after SIGUSR1 and ends killed by SIGTERM, which it does not handle
    assert farmer.returncode == (1 if signum == signal.SIGUSR1 else -signum), err
    assert time.monotonic() - start < 10
    assert f"Stopped by {signal.Signals(signum).name}: 2 running line(s) put back" in out
    assert sorted(ids_in(work / "toprocess")) == [1, 2, 3] and ids_in(work / "failed") == []
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in sleepers)
    # The next run takes them up.
    write_list(tmp_path / "t.txt", ["true", "sleep 60", "sleep 60", "sleep 60"])
    assert not list((work / "b2batch" / "claims").iterdir())


def test_lines_killed_by_the_signal_that_stops_the_farmer_go_back_not_into_failed(tmp_path: Path) -> None:
    """A batch system's cancel (scancel) or Ctrl-C signals every process of the job: the lines may die of the
    SIGTERM a moment before the farmer gets its own. They were stopped, not failed."""
    write_list(tmp_path / "t.txt", ["sleep 60", "sleep 60"])
    work = tmp_path / "t.txt_workdir"
    farmer = popen_farm(tmp_path, "t.txt", "--proc", "2")
    wait_for(lambda: (work / "logs" / "log_1").exists(), 30, "two sleeping lines")
    sleepers = wait_for(lambda: [p for p in psutil.Process(farmer.pid).children() if p.name() == "sleep"][:2]
                        if len(psutil.Process(farmer.pid).children()) >= 2 else None, 10, "the two sleeps")
    for sleeper in sleepers:
        sleeper.send_signal(signal.SIGTERM)
    time.sleep(1.0)  # the farmer sees its lines end first (Slurm's scancel was seen to reach it > 0.5 s later)
    farmer.send_signal(signal.SIGTERM)
    out, err = farmer.communicate(timeout=30)
    assert farmer.returncode == -signal.SIGTERM, err
    assert sorted(ids_in(work / "toprocess")) == [0, 1] and ids_in(work / "failed") == [], out
    assert "Stopped by SIGTERM: 2 running line(s) put back" in out


def test_a_line_killed_by_sigterm_with_no_stop_following_fails_after_a_moment(tmp_path: Path) -> None:
    write_list(tmp_path / "t.txt", ["kill -TERM $$", "true"])
    start = time.monotonic()
    done = farm(tmp_path, "t.txt", "--proc", "2")
    assert done.returncode == 0, done.stderr
    assert ids_in(tmp_path / "t.txt_workdir" / "failed") == [0] and ids_in(tmp_path / "t.txt_workdir" / "finished") == [1]
    assert time.monotonic() - start < 10
    assert "exit code 143 (killed by SIGTERM)" in done.stdout


def test_timeout_stops_the_run_with_exit_1_and_lines_back(tmp_path: Path) -> None:
    write_list(tmp_path / "t.txt", ["sleep 60", "sleep 60", "true"])
    start = time.monotonic()
    done = farm(tmp_path, "t.txt", "--proc", "2", "--timeout", "2")
    assert done.returncode == 1, done.stderr
    assert 1.5 < time.monotonic() - start < 15
    assert "Stopped by the timeout: 2 running line(s) put back" in done.stdout
    assert sorted(ids_in(tmp_path / "t.txt_workdir" / "toprocess")) == [0, 1, 2]


def test_walltime_stops_new_claims(tmp_path: Path) -> None:
    write_list(tmp_path / "t.txt", ["true"] * 3)
    done = farm(tmp_path, "t.txt", "--walltime", "3")  # less than the margin: no line is taken
    assert done.returncode == 0, done.stderr
    assert "taking no more lines" in done.stdout
    assert sorted(ids_in(tmp_path / "t.txt_workdir" / "toprocess")) == [0, 1, 2]
    assert farm(tmp_path, "t.txt", "--walltime", "600").returncode == 0
    assert sorted(ids_in(tmp_path / "t.txt_workdir" / "finished")) == [0, 1, 2]


# --- failures, logs, timeline -----------------------------------------------------------------------------------

def test_failing_line_goes_to_failed_with_its_log_and_exit_code(tmp_path: Path) -> None:
    write_list(tmp_path / "t.txt", ["echo fine", "echo broken input >&2; exit 3", "kill -9 $$",
                                    "no-such-command-b2b"])
    done = farm(tmp_path, "t.txt", "--proc", "2")
    assert done.returncode == 0, done.stderr
    work = tmp_path / "t.txt_workdir"
    assert (work / "failed").read_text().count("\n") == 3
    assert sorted((work / "failed").read_text().splitlines()) == ["1 echo broken input >&2; exit 3", "2 kill -9 $$",
                                                                  "3 no-such-command-b2b"]
    assert (work / "logs" / "log_1").read_text() == "broken input\n"
    assert "task 1 (line 2 of t.txt): echo broken input >&2; exit 3  [exit code 3; log" in done.stdout
    assert "      | broken input" in done.stdout
    assert "exit code 137 (killed by SIGKILL)" in done.stdout and "exit code 127 (command not found)" in done.stdout


def test_lines_too_long_for_the_os_or_not_utf8_fail_alone_and_never_block_a_restart(tmp_path: Path) -> None:
    """Issue 31: a line that cannot be run fails that line alone, with its line number; bytes that are not
    UTF-8 are passed to the command as they are, and printed escaped."""
    long_line = "echo " + "a" * 300_000
    (tmp_path / "t.txt").write_bytes(b"# a comment\n" + long_line.encode() + b"\nprintf '%s' \xff\xfe > raw\n"
                                     b"false \xff\nexit 0\n")
    done = farm(tmp_path, "t.txt", "--proc", "2", "--verbose")
    assert done.returncode == 0, done.stderr
    work = tmp_path / "t.txt_workdir"
    def ids(name: str) -> list[int]:
        return sorted(int(line.split(b" ", 1)[0]) for line in (work / name).read_bytes().splitlines())

    assert ids("failed") == [0, 2] and ids("finished") == [1, 3]
    assert (work / "failed").read_bytes().count(b"false \xff\n") == 1  # the line's bytes kept in PyTaskFarmer's file
    assert (tmp_path / "raw").read_bytes() == b"\xff\xfe"  # the bytes reached the command unchanged
    log = (work / "logs" / "log_0").read_text()
    assert log.startswith("b2batch farm: task 0 (line 2 of t.txt) cannot be started: it is too long for a command "
                          "line on this system (E2BIG")
    assert "(300005 characters)" in done.stdout and len(done.stdout) < 20_000  # the line is shown cut
    assert "task 2 (line 4 of t.txt): false \\xff  [exit code 1;" in done.stdout
    assert "exit code 126 (could not be run)" in done.stdout
    again = farm(tmp_path, "t.txt", "--proc", "2")
    assert again.returncode == 0 and "Traceback" not in again.stderr, again.stderr
    assert "0 left to process" in again.stdout


def test_timeline_is_chrome_trace_json(tmp_path: Path) -> None:
    write_list(tmp_path / "t.txt", ["sleep 0.2", "true", "false"])
    before = time.time()
    assert farm(tmp_path, "t.txt", "--proc", "2").returncode == 0
    assert farm(tmp_path, "t.txt", "--proc", "2").returncode == 0  # a second run appends nothing, keeps it valid
    events = json.loads((tmp_path / "t.txt_workdir" / "timeline.json").read_text())
    assert isinstance(events, list) and len(events) == 3
    for event in events:
        assert event["ph"] == "X" and event["cat"] == "task" and isinstance(event["name"], str)
        assert isinstance(event["pid"], int) and isinstance(event["tid"], int)
        assert before * 1e6 < event["ts"] < time.time() * 1e6  # microseconds since the epoch
        assert 0 <= event["dur"] < 30e6
    sleep = next(e for e in events if e["name"] == "sleep 0.2")
    assert 0.15e6 < sleep["dur"] < 5e6 and sleep["args"]["exit_code"] == 0
    assert next(e for e in events if e["name"] == "false")["args"]["exit_code"] == 1


# --- runners and handlers -----------------------------------------------------------------------------------

def test_container_runner_command_lines(monkeypatch) -> None:
    lines = []
    for engine in ("apptainer", "singularity", "podman", "shifter"):
        runner = ContainerRunner(image="docker://almalinux:9", engine=engine, setup="source /opt/setup.sh",
                                 volumes="/cvmfs /data:/in:ro", tempdir="True", options="--cleanenv"
                                 if engine != "shifter" else "", modules="cvmfs" if engine == "shifter" else "")
        monkeypatch.setattr("tempfile.mkdtemp", lambda prefix="": f"/tmp/{prefix}XYZ")
        launch = runner.launch(7, "athena.py --evtMax 10 'job options.py' > out.log")
        lines.append(f"{engine}: {subprocess.list2cmdline(launch.argv)}")
        lines.append(f"{engine} argv: {json.dumps(launch.argv)}")
    expected = (GOLDEN / "farm_container_commands.txt").read_text().splitlines()
    assert lines == expected


def test_runner_from_an_ini_file_runs_lines_in_a_container(tmp_path: Path) -> None:
    """A fake apptainer on PATH records its arguments and runs the command it was given."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "apptainer"
    fake.write_text('#!/bin/sh\necho "$@" >> "$FAKE_LOG"\nwhile [ "$1" != "img.sif" ]; do shift; done\nshift\n'
                    'exec "$@"\n')
    fake.chmod(0o755)
    env = env_for(tmp_path, PATH=f"{bin_dir}:{os.environ['PATH']}", FAKE_LOG=str(tmp_path / "calls"))
    runners = tmp_path / "home" / ".b2batch" / "runners.d"
    runners.mkdir(parents=True)
    (runners / "box.ini").write_text("[box]\nRunner = b2batch.farm.runners.ContainerRunner\nengine = apptainer\n"
                                     "image = img.sif\nsetup = export GREETING=hello\ntempdir = True\n")
    write_list(tmp_path / "t.txt", ["echo $GREETING $PROC_NUMBER; pwd"])
    done = farm(tmp_path, "t.txt", "--runner", "box", env=env)
    assert done.returncode == 0, done.stderr
    log = (tmp_path / "t.txt_workdir" / "logs" / "log_0").read_text().splitlines()
    assert log[0] == "hello 0"
    call = (tmp_path / "calls").read_text().split()
    assert call[:3] == ["exec", call[1], call[1].replace("--bind=", "--pwd=")] and "/farm-task0-" in call[1]
    assert call[3:6] == ["img.sif", "/bin/bash", "-c"]
    assert not Path(call[1].removeprefix("--bind=")).exists()  # the temporary directory is gone after the line


def test_pytaskfarmer_style_runner_class_from_its_folder(tmp_path: Path) -> None:
    module = tmp_path / "myrunners.py"
    module.write_text("import subprocess\n\nclass Upper:\n    def __init__(self, prefix=''):\n"
                      "        self.prefix = prefix\n\n    def run(self, taskid, command, logfh):\n"
                      "        logfh.write(self.prefix + command.upper() + '\\n')\n        logfh.flush()\n"
                      "        return subprocess.call(command, shell=True, stdout=logfh)\n")
    folder = tmp_path / "home" / ".pytaskfarmer" / "runners.d"
    folder.mkdir(parents=True)
    (folder / "mine.ini").write_text("[upper]\nRunner = myrunners.Upper\nprefix = >> \n")
    write_list(tmp_path / "t.txt", ["echo $PROC_NUMBER", "exit 4"])
    done = farm(tmp_path, "t.txt", "--runner", "upper", env=env_for(tmp_path, PYTHONPATH=str(tmp_path)))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "t.txt_workdir" / "logs" / "log_0").read_text() == ">>ECHO $PROC_NUMBER\n0\n"
    assert ids_in(tmp_path / "t.txt_workdir" / "failed") == [1]


def test_template_handler_from_the_working_directory(tmp_path: Path) -> None:
    (tmp_path / "handlers.ini").write_text("[files]\nTaskList = b2batch.farm.tasklist.TemplateTaskList\n"
                                           "template = wc -c < {line} > size_{id}\n")
    (tmp_path / "a b.txt").write_text("12345")
    write_list(tmp_path / "inputs.txt", ["a b.txt"])
    done = farm(tmp_path, "inputs.txt", "--tasklist", "files")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "size_0").read_text().strip() == "5"
    assert (tmp_path / "inputs.txt_workdir" / "finished").read_text() == "0 a b.txt\n"


# --- bad input ------------------------------------------------------------------------------------------------

def test_bad_input_gives_one_clear_error(tmp_path: Path) -> None:
    missing = farm(tmp_path, "nothing.txt")
    assert missing.returncode == 2 and "The task list nothing.txt does not exist" in missing.stderr
    assert "Traceback" not in missing.stderr
    write_list(tmp_path / "t.txt", ["true"])
    unknown = farm(tmp_path, "t.txt", "--runner", "nope")
    assert unknown.returncode == 2 and "Unknown runner 'nope' (--runner). Known: default, split" in unknown.stderr
    handler = farm(tmp_path, "t.txt", "--tasklist", "nope")
    assert handler.returncode == 2 and "Unknown task-list handler 'nope' (--tasklist)" in handler.stderr
    folder = tmp_path / "home" / ".b2batch" / "runners.d"
    folder.mkdir(parents=True)
    (folder / "bad.ini").write_text("Runner = no section\n")
    bad = farm(tmp_path, "t.txt")
    assert bad.returncode == 2 and f"{folder / 'bad.ini'}" in bad.stderr and "Fix the file" in bad.stderr
    (folder / "bad.ini").write_text("[x]\nRunner = b2batch.farm.runners.ContainerRunner\nimage = i\ncolour = red\n")
    wrong = farm(tmp_path, "t.txt", "--runner", "x")
    assert wrong.returncode == 2 and "[x] cannot make a b2batch.farm.runners.ContainerRunner" in wrong.stderr
    assert "colour" in wrong.stderr
    (folder / "bad.ini").write_text("[x]\nRunner = nomodule.Nothing\n")
    gone = farm(tmp_path, "t.txt", "--runner", "x")
    assert gone.returncode == 2 and "'nomodule.Nothing', which cannot be loaded" in gone.stderr


def test_changed_task_list_is_refused_and_lines_added_at_the_end_are_taken_up(tmp_path: Path) -> None:
    write_list(tmp_path / "t.txt", ["echo a", "echo b"])
    assert farm(tmp_path, "t.txt").returncode == 0
    write_list(tmp_path / "t.txt", ["echo a", "# a comment changes no id", "", "echo b", "echo c"])
    grown = farm(tmp_path, "t.txt")
    assert grown.returncode == 0, grown.stderr
    assert "the task list grew from 2 to 3 tasks" in grown.stdout
    assert sorted(ids_in(tmp_path / "t.txt_workdir" / "finished")) == [0, 1, 2]
    write_list(tmp_path / "t.txt", ["echo B", "echo a", "echo b", "echo c"])
    changed = farm(tmp_path, "t.txt")
    assert changed.returncode == 2
    assert "The task list t.txt changed since the work dir" in changed.stderr
    assert "Task ids would point to other lines" in changed.stderr and "another --workdir" in changed.stderr


def test_pytaskfarmers_work_dir_is_checked_and_continued(tmp_path: Path) -> None:
    recorded = GOLDEN / "farm_pytaskfarmer"
    shutil.copy(recorded / "tasks.txt", tmp_path / "tasks.txt")
    work = tmp_path / "tasks.txt_workdir"
    work.mkdir()
    (work / "finished").write_text("0 echo one\n")
    (work / "toprocess").write_text("1 printenv PROC_NUMBER\n4 echo two  words\n")  # as PyTaskFarmer writes it
    done = farm(tmp_path, "tasks.txt")
    assert done.returncode == 0, done.stderr
    assert sorted(ids_in(work / "finished")) == [0, 1, 4] and not (work / "logs" / "log_0").exists()
    other = tmp_path / "other.txt"
    write_list(other, ["echo one", "something else"])
    shutil.copytree(recorded, tmp_path / "theirs")
    refused = farm(tmp_path, "other.txt", "--workdir", "theirs")
    assert refused.returncode == 2 and "does not belong to the task list other.txt" in refused.stderr


def test_lock_dir_holds_the_lock_named_as_pytaskfarmer_names_it(tmp_path: Path) -> None:
    write_list(tmp_path / "t.txt", ["true"])
    done = farm(tmp_path, "t.txt", "--lock-dir", "locks")
    assert done.returncode == 0, done.stderr
    expected = lock_path(tmp_path / "t.txt_workdir", tmp_path / "locks")
    assert expected.exists() and expected.name.endswith("_lock") and len(expected.name) == 32 + 5
    assert not (tmp_path / "t.txt_workdir" / "lock").exists()
