"""engine/processes.py: the one judgement of whether the process a note names still runs, shared by the pilot
queues' steering notes (engine/pilots/orphans.py) and the farm's farmer heartbeats (farm/workdir.py)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from b2batch.engine.processes import note_lives


def test_a_note_of_this_host_lives_while_its_process_runs_and_not_after() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        started = psutil.Process(child.pid).create_time()
        note = {"host": socket.gethostname(), "pid": child.pid, "started": started}
        assert note_lives(note)
        assert note_lives({**note, "started": None})  # no start time noted: the pid running is enough
        assert not note_lives({**note, "started": started - 100})  # the pid now belongs to another process
    finally:
        child.kill()
        child.wait()
    assert not note_lives(note)
    assert not note_lives({"host": socket.gethostname(), "pid": 0})
    assert not note_lives({"host": socket.gethostname(), "pid": "x"})


def test_a_note_of_another_host_cannot_be_judged_here() -> None:
    assert note_lives({"host": "elsewhere.example", "pid": 1, "started": 0.0})
    assert note_lives({"pid": 1})


def test_the_farm_judges_its_farmers_by_the_same_rule(tmp_path: Path) -> None:
    """A farmer whose heartbeat is fresh but whose process was replaced (pid reuse) is dead; one that runs lives."""
    from b2batch.farm.workdir import WorkDir

    workdir = WorkDir(tmp_path / "w", heartbeat_timeout=60.0)
    workdir.claims.mkdir(parents=True, exist_ok=True)
    me = {"host": socket.gethostname(), "pid": os.getpid(), "create_time": psutil.Process().create_time()}
    workdir.register("alive", me)
    workdir.register("replaced", {**me, "create_time": me["create_time"] - 1000})
    workdir.register("elsewhere", {**me, "host": "elsewhere.example"})
    (workdir.claims / "stale").touch()
    (workdir.claims / "stale.json").write_text(json.dumps({**me, "host": "elsewhere.example"}))
    old = time.time() - 120
    os.utime(workdir.claims / "stale.json", (old, old))
    assert sorted(workdir.dead_farmers("steering")) == ["replaced", "stale"]


def test_a_process_start_time_read_from_proc_is_psutils() -> None:
    """Notes compare the start time a process wrote (read from /proc, without psutil) with psutil's reading."""
    from b2batch.engine.processes import process_started

    for pid in (1, os.getpid(), os.getppid()):
        assert process_started(pid) == pytest.approx(psutil.Process(pid).create_time(), abs=0.02)
    assert process_started(2 ** 22 + 12345) is None  # no such process


def test_the_host_name_is_sockets() -> None:
    """Notes written by a process that took its host name from socket are judged by one that does not."""
    from b2batch.engine.processes import host_name

    assert host_name() == socket.gethostname()
