"""The batches of a pilot queue survive kills: a SIGKILLed pilot or steering process loses no finished task and
runs none twice, when a pilot claims several tasks at a time (short leaves for one pilot: their batches hold
several).

The task that a killed pilot was running is run again (once, as a lost task: "Resubmitted"); the tasks of its
claimed batch that had not started wait again in the queue and run once, elsewhere."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from conftest import wait_for
from test_pilots import runs, settings, workers_left

N = 200
LEAVES = ["--n", str(N), "--pilots", "1", "--slow", "-2", "--seconds", "0.05"]


def claims(folder: Path) -> dict[str, list[str]]:
    """The unit names of the batch each pilot holds now, by pilot."""
    found: dict[str, list[str]] = {}
    for claim in (folder / "task_files" / "_pilots").glob("*/claimed/*/*.json"):
        try:
            found.setdefault(claim.parent.name, []).extend(
                name for name, _entry in json.loads(claim.read_text())["units"])
        except (OSError, ValueError):
            continue
    return found


def pilot_pid(folder: Path, worker: str) -> int:
    beat = next((folder / "task_files" / "_pilots").glob(f"*/workers/{worker}.json"))
    return int(json.loads(beat.read_text())["pid"])


def process_tree(pid: int) -> set[int]:
    """``pid`` and its descendants now (from /proc)."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    parents[int(entry)] = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    tree = {pid}
    while grown := {child for child, parent in parents.items() if parent in tree} - tree:
        tree |= grown
    return tree


def leaf_of(folder: Path, unit: str, missing: bool = False) -> int | None:
    """The leaf whose journal names ``unit`` (``missing``: None when none does, e.g. a unit resubmitted under a
    new name)."""
    for journal in (folder / "task_files").glob("Leaf/*/submission.json"):
        noted = json.loads(journal.read_text())
        if noted.get("unit") == unit:
            return int(json.loads((journal.parent / "job.json").read_text())["task_params"]["i"])
    if missing:
        return None
    raise AssertionError(f"no leaf's journal names {unit}")


@pytest.mark.slow
def test_a_pilot_killed_mid_batch_loses_its_running_task_alone(workflow, tmp_path: Path) -> None:
    wf = workflow("pilots.py")
    settings(tmp_path)
    process = wf.popen("--system", "local", *LEAVES, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        held = wait_for(lambda: {w: names for w, names in claims(tmp_path).items() if len(names) >= 4}, 90,
                        "a pilot to claim a batch of 4 or more leaves")
        victim, names = next(iter(held.items()))
        pid = pilot_pid(tmp_path, victim)
        # The pilot and its processes stopped first, so that its log of the units it started is read as it is at
        # the kill (the steering process removes it once it has taken the dead pilot's claim back).
        tree = process_tree(pid)
        for each in tree:
            os.kill(each, signal.SIGSTOP)
        log = next((tmp_path / "task_files" / "_pilots").glob(f"*/done/{victim}.jsonl"), None)
        started = {json.loads(line)["name"] for line in log.read_text().splitlines()} if log else set()
        os.kill(pid, signal.SIGKILL)  # its runner and leaf die with it
        for each in tree - {pid}:
            with contextlib.suppress(ProcessLookupError):
                os.kill(each, signal.SIGCONT)
        stdout, stderr = process.communicate(timeout=240)
    finally:
        process.kill()
    assert process.returncode == 0, stderr[-5000:]
    noted = runs(tmp_path)
    assert sorted(noted) == list(range(N))
    again = {i: lines for i, lines in noted.items() if [line[0] for line in lines] != ["start", "end"]}
    # At most the leaf that ran in the killed pilot ran twice; every other leaf, claimed by it or not, once.
    assert len(again) <= 1, again
    for lines in again.values():
        assert [line[0] for line in lines] == ["start", "start", "end"], lines
        assert "Resubmitted (1)" in stderr and "ended while running it" in stderr
    # The leaves of the killed pilot's batch that had not started ran once, in another pilot.
    unstarted = [leaf_of(tmp_path, name) for name in names if name not in started]
    assert unstarted, f"the killed pilot had started every leaf of its batch {names}: nothing was put back"
    for i in unstarted:  # (a leaf's note: what, its pid, its parent's pid, when)
        assert [line[0] for line in noted[i]] == ["start", "end"], noted[i]
        assert not {int(noted[i][0][1]), int(noted[i][0][2])} & tree, (i, noted[i], tree)
    ran_there = [leaf_of(tmp_path, name, missing=True) for name in names if name in started]
    assert all(i is None or int(noted[i][0][1]) in tree for i in ran_there), (ran_there, tree)


@pytest.mark.slow
def test_steering_killed_mid_batch_and_restarted_runs_each_task_once(workflow, tmp_path: Path) -> None:
    wf = workflow("pilots.py")
    settings(tmp_path, pilot_idle_timeout=3)
    first = wf.popen("--system", "local", *LEAVES, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: len(runs(tmp_path)) >= 80 and any(len(b) >= 3 for b in claims(tmp_path).values()), 90,
                 "80 leaves to start, a batch of 3 or more leaves claimed")
        first.send_signal(signal.SIGKILL)  # no clean-up: the pilots run on with their batches
        first.wait(timeout=30)
    finally:
        first.kill()
    assert workers_left(tmp_path), "the pilots should outlive the steering process"
    done = wf.run("--system", "local", *LEAVES, timeout=240)
    assert done.returncode == 0, done.stderr[-5000:]
    noted = runs(tmp_path)
    assert sorted(noted) == list(range(N))
    for i, lines in noted.items():  # no task ran twice, none finished was lost
        assert [line[0] for line in lines] == ["start", "end"], (i, lines)
    assert sorted((tmp_path / "results").rglob("sum.txt"))[0].read_text() == f"{N * (N - 1) // 2}\n"
    wait_for(lambda: not workers_left(tmp_path), 30, "no pilot to be left behind")


@pytest.mark.slow
def test_steering_killed_while_a_pilot_runs_a_task_of_its_batch_follows_it_on_restart(workflow,
                                                                                        tmp_path: Path) -> None:
    """The restarted steering process follows the task a live pilot of the killed one still runs, and the
    rest of that pilot's batch, rather than queueing them again."""
    wf = workflow("pilots.py")
    settings(tmp_path, pilot_idle_timeout=3)
    slow = ["--n", "40", "--pilots", "1", "--slow", "20", "--seconds", "12"]
    first = wf.popen("--system", "local", *slow, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: runs(tmp_path).get(20), 90, "leaf 20 (12 s) to start")
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    finally:
        first.kill()
    done = wf.run("--system", "local", *slow, timeout=240)
    assert done.returncode == 0, done.stderr[-5000:]
    noted = runs(tmp_path)
    assert sorted(noted) == list(range(40))
    for i, lines in noted.items():  # leaf 20 was followed to its end, not run again
        assert [line[0] for line in lines] == ["start", "end"], (i, lines)
    wait_for(lambda: not workers_left(tmp_path), 30, "no pilot to be left behind")
