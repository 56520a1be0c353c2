"""Whether the process a note on the shared file system names still runs, and signalling a process group.

A steering process notes itself in each pilot queue it uses (``steering/<host>-<pid>-<tag>.json``), a farmer of
``b2batch farm`` in its heartbeat (``b2batch/claims/<farmer>.json``): the host, the pid and the time the process
started. A later process on the same host judges from the note whether that process is gone (killed, or ended
without cleaning up): a pid that is not running, or that now belongs to another process (pids are reused; the
start time tells them apart). A note of another host cannot be judged here: it is taken to run, and its
heartbeat's age or its queue's idle timeout decides instead.
"""

from __future__ import annotations

import functools
import json
import os
import time
from typing import Any


def host_name() -> str:
    """This host's name as ``socket.gethostname()`` gives it (the kernel's node name), without importing socket
    (over a millisecond of every steering process's start)."""
    return os.uname().nodename


def local_timestamp() -> str:
    """Now in this host's time zone as ``date -Is`` writes it (``2026-12-06T15:04:05+01:00``), without importing
    datetime (a pilot's modules, loaded before its first unit, need it nowhere else)."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    return f"{stamp[:-2]}:{stamp[-2:]}"


#: Seconds by which two readings of one process's start time may differ (psutil computes it from boot time and
#: clock ticks).
SAME_START = 1.0


def process_started(pid: int) -> float | None:
    """When the process ``pid`` of this host started (None: there is none): psutil's ``create_time``, read
    from ``/proc`` on Linux as psutil computes it (the boot time plus the start's clock ticks), so that a
    steering process or a job that notes itself needs no psutil (~8 ms to import)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        ticks = int(stat[stat.rindex(b")") + 2:].split()[19])
        return _boot_time() + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        pass
    import psutil

    try:
        return psutil.Process(pid).create_time()
    except (psutil.Error, OSError, ValueError):
        return None


@functools.cache
def _boot_time() -> float:
    with open("/proc/stat", "rb") as f:
        for line in f:
            if line.startswith(b"btime"):
                return float(line.split()[1])
    raise OSError("no btime in /proc/stat")


def note_lives(about: dict[str, Any], started: str = "started") -> bool:
    """Whether the process a note ``about`` names (its ``host``, ``pid`` and, under the key ``started``, its
    start time; without one any process of that pid counts) still runs. True for a note of another host or of
    none, and for a process whose start time this user may not read: the heartbeat's age or the queue's idle
    timeout decides then."""
    if about.get("host") != host_name():
        return True
    try:
        pid = int(about.get("pid") or 0)
    except (TypeError, ValueError):
        return False
    if pid <= 0:
        return False
    import psutil

    try:
        now = psutil.Process(pid).create_time()
    except psutil.AccessDenied:
        return True  # it runs, as another user: its start time is not ours to read
    except (psutil.Error, OSError, ValueError):
        return False
    expected = about.get(started)
    if expected is None:  # no start time noted: the pid runs
        return True
    try:
        return abs(now - float(expected)) < SAME_START
    except (TypeError, ValueError):
        return False


def noted_process(folder: str | os.PathLike[str]) -> Any:
    """The running process (psutil) that the ``process`` note in a job folder names: a local job forked without
    a wrapper (:mod:`b2batch.systems.local_forks`), found by it as a wrapper is by its command line. None when
    there is no note, or its process ended (or is another one now)."""
    import psutil

    try:
        with open(os.path.join(folder, "process")) as f:
            note = json.load(f)
        if not note_lives(note) or note.get("host") != host_name():
            return None
        process = psutil.Process(int(note["pid"]))
        return None if process.status() == psutil.STATUS_ZOMBIE else process
    except (OSError, ValueError, KeyError, TypeError, psutil.Error):
        return None


def signal_group(pid: int, signum: int) -> None:
    """Send ``signum`` to the process group whose leader is ``pid`` (a job's wrapper, a unit's child or a farm
    line's shell: each starts a group of its own), or to the process alone when its group is gone or not ours.
    Nothing happens when the process is gone too."""
    try:
        os.killpg(pid, signum)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, signum)
        except (ProcessLookupError, PermissionError):
            pass
