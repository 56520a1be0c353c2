"""``b2batch farm`` beside the real PyTaskFarmer 0.1.0 (its ``pytaskfarmer.py`` in a venv of its own): the same
task lists, signals, timeouts and restarts; the work-dir files compared line by line and the exit statuses.

On local cores and as pilot jobs (local jobs, the HTCondor emulator, the real Slurm and SGE), each b2batch run is
compared with PyTaskFarmer's run of the same list on local cores. What may differ is listed, with its reason, in
the table "Differences from PyTaskFarmer" of docs/farm.md: the test reads it, so an unlisted difference fails.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest
from conftest import clean_env, wait_for
from peers import peer_python

DOCS = Path(__file__).resolve().parents[3] / "docs" / "farm.md"
#: The lock's place depends on these in PyTaskFarmer ($SCRATCH, $TMP, $TMPDIR); both tools run without them.
LOCK_VARIABLES = ("SCRATCH", "TMP", "TMPDIR", "B2BATCH_FARM_LOCK_DIR")


# --- the documented differences -----------------------------------------------------------------------------

def documented() -> dict[str, set[str]]:
    """The rows of docs/farm.md's table of differences: scenario -> the aspects that may differ there
    (scenario ``*``: everywhere). Each row must give a reason."""
    text = DOCS.read_text()
    start = text.index("## Differences from PyTaskFarmer")
    rows: dict[str, set[str]] = {}
    for line in text[start:].splitlines()[1:]:
        if line.startswith("## "):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if len(cells) < 5 or not cells[0].startswith("`"):
            continue
        scenario, aspect, reason = cells[0].strip("`"), cells[1].strip("`"), cells[4]
        assert len(reason) > 5, f"docs/farm.md: the difference {scenario}/{aspect} needs a reason"
        rows.setdefault(scenario, set()).add(aspect)
    return rows


def allowed(scenario: str) -> set[str]:
    rows = documented()
    return rows.get("*", set()) | rows.get(scenario, set())


# --- running both tools -------------------------------------------------------------------------------------

@dataclass
class Outcome:
    """A finished run: its exit status (negative: killed by that signal), its work dir, its output."""

    status: int
    workdir: Path
    out: str = ""
    seconds: float = 0.0
    stopped_after: float | None = None  # seconds from the stop (signal or timeout) to the end
    extra: dict[str, object] = field(default_factory=dict)


def env_for(folder: Path) -> dict[str, str]:
    (folder / "home").mkdir(exist_ok=True)
    env = clean_env(HOME=str(folder / "home"), B2BATCH_NO_LIVE="1")
    for name in LOCK_VARIABLES:
        env.pop(name, None)
    return env


def peer_command() -> list[str]:
    python = peer_python("pytaskfarmer")
    return [str(python), str(python.parent / "pytaskfarmer.py")]


def our_command(system: str | None = None, jobs: int = 1) -> list[str]:
    command = [sys.executable, "-m", "b2batch", "farm"]
    return command + (["--batch-system", system, "--jobs", str(jobs)] if system else [])


#: b2batch's own ``pytaskfarmer.py`` (the console script of the same name), PyTaskFarmer's command line.
OUR_PYTASKFARMER = [sys.executable, "-c", "import sys; from b2batch.farm.command_line import pytaskfarmer_main; "
                    "sys.exit(pytaskfarmer_main())"]


def settings(folder: Path, **values: object) -> None:
    (folder / "settings.json").write_text(json.dumps({"output_wait_timeout": 5, "poll_interval": 0.5,
                                                       "max_poll_interval": 2, **values}))


def run_farm(command: list[str], folder: Path, lines: list[str], *args: str, stop: int | None = None,
             whole_group: bool = False, timeout: float = 240, started: int = 2, prefix: list[str] | None = None,
             env: dict[str, str] | None = None, may_hang: bool = False) -> Outcome:
    """Run a farm of ``lines`` in ``folder`` (its work dir ``wd``); with ``stop``, send that signal once
    ``started`` lines run (to the farmer, or ``whole_group``: to its process group, as a batch system does)."""
    folder.mkdir(parents=True, exist_ok=True)
    task_list = folder / "tasks.txt"
    if not task_list.exists():
        task_list.write_bytes(b"".join(line.encode("utf-8", "surrogateescape") + b"\n" for line in lines))
    work = folder / "wd"
    begin = time.monotonic()
    # Output into a file, not a pipe: PyTaskFarmer's pool workers may outlive it, holding a pipe open.
    output = folder / f"output.{time.monotonic_ns()}.txt"
    with open(output, "w") as sink:
        process = subprocess.Popen([*(prefix or []), *command, "tasks.txt", "--workdir", "wd", *args], cwd=folder,
                                   env=env or env_for(folder), stdout=sink, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    stopped_at = None
    try:
        if stop is not None:
            wait_for(lambda: len(list((work / "logs").glob("log_*"))) >= started if (work / "logs").is_dir()
                     else False, 180, f"{started} lines started in {folder}", interval=0.1)
            time.sleep(0.5)
            stopped_at = time.monotonic()
            if whole_group:
                os.killpg(process.pid, stop)
            else:
                process.send_signal(stop)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            if not may_hang:
                raise
            os.killpg(process.pid, signal.SIGKILL)  # PyTaskFarmer, after a line it could not start (see play)
            process.wait()
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    end = time.monotonic()
    out = output.read_text(errors="replace")
    return Outcome(process.returncode, work, out, end - begin, None if stopped_at is None else end - stopped_at)


def settle(workdir: Path, seconds: float = 20) -> None:
    """Wait until no line of ``workdir`` runs any more (PyTaskFarmer's orphans after a SIGTERM)."""
    def quiet() -> bool:
        for process in psutil.process_iter(["cwd", "cmdline"]):
            try:
                if process.info["cwd"] == str(workdir.parent) and "sleep" in " ".join(process.info["cmdline"] or []):
                    return False
            except (psutil.Error, TypeError):
                continue
        return True

    wait_for(quiet, seconds, f"the lines of {workdir} to end", interval=0.2)
    time.sleep(0.5)


# --- comparing work dirs ------------------------------------------------------------------------------------

def snapshot(outcome: Outcome) -> dict[str, object]:
    """What a user sees of a run: exit status and the work dir's files, with times and paths normalised
    (the ordering of toprocess and the timeline's event details are documented differences, see compare)."""
    work = outcome.workdir
    view: dict[str, object] = {"exit status": outcome.status}
    for path in sorted(work.rglob("*")):
        name = path.relative_to(work).as_posix()
        if name == "b2batch" or name.startswith("b2batch/") or path.is_dir():
            continue
        data = path.read_bytes()
        if name == "timeline.json":
            events = json.loads(data)
            view[name] = sorted((e["name"], e["cat"], e["ph"]) for e in events)
            view["timeline.json details"] = sorted(json.dumps({k: v for k, v in e.items()
                                                               if k in ("tid", "args")}) for e in events)
            continue
        if name == "toprocess":
            view["toprocess order"] = data
            data = b"".join(sorted(data.splitlines(keepends=True)))
        if name in ("finished", "failed"):
            data = b"".join(sorted(data.splitlines(keepends=True)))
        view[name] = data.replace(str(work).encode(), b"<workdir>")
    return view


def compare(peer: Outcome, ours: Outcome) -> set[str]:
    """The aspects in which the two runs differ."""
    a, b = snapshot(peer), snapshot(ours)
    differ = {key for key in set(a) | set(b) if a.get(key) != b.get(key)}
    if "toprocess order" in differ and a.get("toprocess") == b.get("toprocess") and sorted(
            a.get("toprocess order", b"").splitlines()) == sorted(b.get("toprocess order", b"").splitlines()):
        differ.add("toprocess order")  # the same lines, in another order
    if "lock" in differ and "lock" in b:
        differ.discard("lock")  # an empty lock file either way; PyTaskFarmer's is reopened with "w+"
    return differ


def check(scenario: str, peer: Outcome, ours: Outcome) -> None:
    differ = compare(peer, ours)
    unlisted = differ - allowed(scenario)
    details = {key: (snapshot(peer).get(key), snapshot(ours).get(key)) for key in unlisted}
    assert not unlisted, (f"{scenario}: differences from PyTaskFarmer not listed in docs/farm.md: {details}\n"
                          f"PyTaskFarmer said:\n{peer.out[-2000:]}\nb2batch said:\n{ours.out[-2000:]}")


# --- the scenarios ------------------------------------------------------------------------------------------

PLAIN = ["echo one", "false", "ls /no/such/dir/for/the/farm", "echo two  spaces", "true", "echo three"]
# Lines that never end by themselves in a scenario (each is stopped or timed out): long enough that a timeout set
# for a slow pilot start still stops them (a pilot that starts them at once must not see them finish)
SLEEPERS = ["sleep 120"] * 4
SHORT = ["sleep 2"] * 4
UNRUNNABLE = ["echo a", "no-such-command-of-the-farm", "echo x\x00y", "echo b"]


@dataclass
class Scenario:
    lines: list[str]
    args: tuple[str, ...] = ("--proc", "2")
    stop: int | None = None
    whole_group: bool = False
    restart: bool = False
    #: Options given to b2batch farm only.
    ours: tuple[str, ...] = ()


SCENARIOS: dict[str, Scenario] = {
    "plain": Scenario(PLAIN),
    "shell": Scenario(["echo $PROC_NUMBER", "echo 'quoted  words'"]),
    "shell, --runner split": Scenario(["echo $PROC_NUMBER", "echo 'quoted  words'"], ours=("--runner", "split")),
    "timeout": Scenario(SLEEPERS, ("--proc", "2", "--timeout", "3")),
    "SIGUSR1": Scenario(SLEEPERS, stop=signal.SIGUSR1),
    "SIGINT": Scenario(SLEEPERS, stop=signal.SIGINT),
    "SIGTERM to the group": Scenario(SLEEPERS, stop=signal.SIGTERM, whole_group=True),
    "SIGTERM to the farmer": Scenario(["sleep 3"] * 4, stop=signal.SIGTERM),
    "restart after a timeout": Scenario(SHORT, ("--proc", "2", "--timeout", "1"), restart=True),
    "unrunnable lines": Scenario(UNRUNNABLE, ("--proc", "1")),
}

_peer_runs: dict[str, Outcome] = {}


def peer_run(scenario: str, folder: Path) -> Outcome:
    """PyTaskFarmer's run of a scenario on local cores (once per test session)."""
    if scenario not in _peer_runs:
        _peer_runs[scenario] = play(SCENARIOS[scenario], peer_command(), folder / "pytaskfarmer")
    return _peer_runs[scenario]


def play(s: Scenario, command: list[str], folder: Path, prefix: list[str] | None = None,
         env: dict[str, str] | None = None) -> Outcome:
    peer = command == peer_command()
    if not peer:
        s = Scenario(s.lines, (*s.args, *s.ours), s.stop, s.whole_group, s.restart)
    # PyTaskFarmer's pool sometimes hangs at exit after a worker raised (a line it could not start): seen here
    # 2 of about 20 runs here, under load. Such a run is ended after 20 s; its exit status is a listed difference.
    hangs = peer and s.lines == UNRUNNABLE
    outcome = run_farm(command, folder, s.lines, *s.args, stop=s.stop, whole_group=s.whole_group, prefix=prefix,
                       env=env, timeout=20 if hangs else 240, may_hang=hangs)
    if s.stop == signal.SIGTERM:
        settle(outcome.workdir)  # PyTaskFarmer's lines run on after it died
    if s.restart:
        first = outcome
        args = list(s.args[:s.args.index("--timeout")]) if "--timeout" in s.args else list(s.args)
        outcome = run_farm(command, folder, s.lines, *args, prefix=prefix, env=env)
        outcome.extra["first"] = first
    return outcome


@pytest.mark.parametrize("tool", ["b2batch farm", "pytaskfarmer.py"])
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_on_local_cores_the_work_dir_and_exit_status_are_pytaskfarmers(tmp_path: Path, scenario: str,
                                                                       tool: str) -> None:
    peer = peer_run(scenario, tmp_path)
    ours = play(SCENARIOS[scenario], our_command() if tool == "b2batch farm" else OUR_PYTASKFARMER,
                tmp_path / "b2batch")
    check(scenario, peer, ours)
    if scenario == "restart after a timeout":
        check("timeout", peer.extra["first"], ours.extra["first"])  # type: ignore[arg-type]
    if scenario == "unrunnable lines":  # a restart takes none of them again, and does not crash
        again = run_farm(our_command(), tmp_path / "b2batch", [], "--proc", "1")
        assert again.status == 0 and "Traceback" not in again.out, again.out
        assert (again.workdir / "toprocess").read_text() == ""
        assert "task 2 (line 3 of tasks.txt) cannot be started: it contains a NUL byte" in \
            (again.workdir / "logs" / "log_2").read_text()


def test_the_table_of_differences_is_read_and_each_row_is_seen(tmp_path: Path) -> None:
    """Each documented difference of a scenario really occurs (a stale row is as wrong as a missing one), and a
    difference in a file that the table does not list is caught."""
    rows = documented()
    assert rows.get("*") and rows.get("unrunnable lines"), rows
    peer = peer_run("shell", tmp_path)  # a scenario in which PyTaskFarmer behaves the same every time
    ours = play(SCENARIOS["shell"], our_command(), tmp_path / "b2batch")
    assert compare(peer, ours) == rows["shell"] | {"timeline.json details"}, (compare(peer, ours), rows["shell"])
    (ours.workdir / "finished").write_text("0 echo $PROC_NUMBER\n9 not a line\n")
    assert "finished" in compare(peer, ours) and "finished" not in allowed("shell")


@pytest.mark.parametrize("first", ["pytaskfarmer", "b2batch"])
def test_either_tool_continues_the_others_work_dir_after_a_timeout(tmp_path: Path, first: str) -> None:
    """Stopped by --timeout under one tool, restarted under the other: the end is PyTaskFarmer's own restart."""
    tools = {"pytaskfarmer": peer_command(), "b2batch": our_command()}
    second = "b2batch" if first == "pytaskfarmer" else "pytaskfarmer"
    folder = tmp_path / f"{first}-then-{second}"
    stopped = run_farm(tools[first], folder, SHORT, "--proc", "2", "--timeout", "1")
    assert stopped.status == 1 and sorted((stopped.workdir / "toprocess").read_text().splitlines()) == [
        f"{i} sleep 2" for i in range(4)], stopped.out
    continued = run_farm(tools[second], folder, SHORT, "--proc", "2")
    check("restart after a timeout", peer_run("restart after a timeout", tmp_path), continued)
    assert sorted((continued.workdir / "finished").read_text().splitlines()) == [f"{i} sleep 2" for i in range(4)]


@pytest.mark.parametrize("args", [("missing.txt",), ("tasks.txt", "--runner", "nosuchrunner"),
                                  ("tasks.txt", "--tasklist", "nosuchhandler")])
def test_bad_input_exits_2_with_one_line_where_pytaskfarmer_raises(tmp_path: Path, args: tuple[str, ...]) -> None:
    """PyTaskFarmer ends with a Python traceback and status 1 (a documented difference); b2batch with one line
    naming the input and the fix, status 2."""
    (tmp_path / "tasks.txt").write_text("true\n")
    env = env_for(tmp_path)
    peer = subprocess.run([*peer_command(), *args], cwd=tmp_path, env=env, capture_output=True, text=True,
                          check=False, timeout=60)
    ours = subprocess.run([*our_command(), *args], cwd=tmp_path, env=env, capture_output=True, text=True, check=False,
                          timeout=60)
    assert peer.returncode == 1 and "Traceback" in peer.stderr, peer.stderr
    assert ours.returncode == 2 and "Traceback" not in ours.stderr, ours.stderr
    error = [line for line in ours.stderr.splitlines() if "error:" in line]
    assert len(error) == 1 and error[0].startswith("b2batch farm: error: "), ours.stderr
    assert args[-1] in error[0]
    assert "bad input" in documented()


# --- as pilot jobs --------------------------------------------------------------------------------------------

def pilot_job_ids(work: Path) -> list[str]:
    return [str(json.loads(journal.read_text())["job_id"])
            for journal in (work / "b2batch" / "jobs" / "pilots").glob("*/submission.json")]


def as_jobs(scenario: str, system: str, tmp_path: Path, queue: Callable[[list[str]], list[str]] | None = None,
            timeout: int = 3, emulate: str | None = None) -> Outcome:
    """The scenario as one pilot job on ``system``, compared with PyTaskFarmer's run on local cores; a stop
    must end the farm within 5 s (a timeout within T + 5 s) and leave no pilot in the queue."""
    folder = tmp_path / f"b2batch-{system}"
    folder.mkdir()
    settings(folder, scheduler_unreachable_timeout=30)
    env = prefix = None
    if emulate:
        env = {**env_for(folder), "B2BATCH_EMULATOR_DIR": str(folder / "emulator"), "B2BATCH_EMULATOR_SLOTS": "4"}
        prefix = [sys.executable, "-m", "b2batch", "emulate", emulate, "--"]
    s = SCENARIOS[scenario]
    if "--timeout" in s.args:  # long enough for the pilot to start its lines
        s = Scenario(s.lines, (*s.args[:s.args.index("--timeout")], "--timeout", str(timeout)), s.stop,
                     s.whole_group, s.restart)
    ours = play(s, our_command(system), folder, prefix=prefix, env=env)
    check(scenario, peer_run(scenario, tmp_path), ours)
    if s.stop is not None:
        assert ours.stopped_after is not None and ours.stopped_after < 5, (ours.stopped_after, ours.out[-3000:])
    if "--timeout" in s.args:
        assert ours.seconds < timeout + 5, (ours.seconds, ours.out[-3000:])
        assert len(list((ours.workdir / "logs").glob("log_*"))) == 2, "no line ran before the timeout"
    if queue is not None:
        ids = pilot_job_ids(ours.workdir)
        assert ids
        wait_for(lambda: not queue(ids), 10, f"{system} to drop the pilots {ids} from its queue", interval=0.5)
    assert not list((ours.workdir / "b2batch" / "claims").iterdir()), "a farmer is still registered"
    return ours


@pytest.mark.parametrize("scenario", ["plain", "timeout", "SIGUSR1", "SIGTERM to the group", "SIGINT"])
def test_as_local_pilot_jobs_the_work_dir_and_exit_status_are_pytaskfarmers(tmp_path: Path, scenario: str) -> None:
    as_jobs(scenario, "local", tmp_path, timeout=5)


@pytest.mark.slow
@pytest.mark.parametrize("emulator", ["htcondor", "lsf"])
@pytest.mark.parametrize("scenario", ["plain", "timeout"])
def test_as_pilot_jobs_on_the_emulators(tmp_path: Path, scenario: str, emulator: str) -> None:
    as_jobs(scenario, emulator, tmp_path, timeout=8, emulate=emulator)


def squeue(ids: list[str]) -> list[str]:
    out = subprocess.run(["squeue", "-h", "-o", "%i", "-j", ",".join(ids)], capture_output=True, text=True,
                         check=False).stdout
    return [line.strip() for line in out.splitlines() if line.strip()]


def qstat(ids: list[str]) -> list[str]:
    out = subprocess.run(["qstat"], capture_output=True, text=True, check=False).stdout
    return [i for i in ids if re.search(rf"^\s*{re.escape(i)}\s", out, re.M)]


@pytest.mark.slow
@pytest.mark.slurm
@pytest.mark.parametrize("scenario", ["plain", "timeout", "SIGUSR1", "SIGTERM to the group"])
def test_as_pilot_jobs_on_the_real_slurm(slurm: None,  # noqa: F811
                                         tmp_path: Path, scenario: str) -> None:
    as_jobs(scenario, "slurm", tmp_path, squeue, timeout=12)


@pytest.mark.slow
@pytest.mark.sge
@pytest.mark.parametrize("scenario", ["plain", "timeout", "SIGUSR1"])
def test_as_pilot_jobs_on_the_real_sge(sge: None,  # noqa: F811
                                       tmp_path: Path, scenario: str) -> None:
    # 45 s: the pilot must start its lines before the timeout (a busy SGE took more than 15 s to start it once,
    # and with the machine loaded, 4 test runs side by side, more than 25 s), and they must not end by then
    # (SLEEPERS: 120 s; with "sleep 30" and 40 s, a pilot that started at once saw two lines finish)
    as_jobs(scenario, "sge", tmp_path, qstat, timeout=45)
