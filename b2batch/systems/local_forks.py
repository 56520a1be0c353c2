"""Local jobs forked from a prepared copy of the steering process (the setting ``local_start``).

A local job's wrapper is a shell that starts a fresh interpreter, which imports b2batch again: 60-90 ms before a
pilot claims its first unit, most of what a ``Pool.map`` of small items costs on a laptop. So when a run's local
system is made while the steering process has one thread, it forks a copy of that process (the *zygote*, like the
server of multiprocessing's ``forkserver``), which imports what a pilot runs and waits for requests on a pipe. A
job whose wrapper would do no more than export ``env``, change into ``working_dir`` and run this interpreter on
the node-side entry point (:class:`~b2batch.engine.files.Launch`: no ``env_script``, container, checkpoint signal
or other ``executable``) is forked from the zygote in about a millisecond, and the child does what the wrapper
does: a session of its own; the job's log files, appended to, as stdout and stderr; the line saying where and when
the job started; the steering process's environment of the moment with ``env`` on top; the working dir (if it
cannot change into it: a set-up failure, exit code 3); the entry point; ``peak_rss`` and the exit-code file. The
zygote reaps its children and reports each end (exit status, CPU time, peak RSS) on a second pipe, which the local
system reads where it would call ``wait4``; for a child that a signal killed it writes the exit code 128 + the
signal, as the wrapper's trap does. Each child notes its pid and start time in the job folder's ``process`` file,
by which ``b2batch status``, ``cancel`` and a restarted run find it, as they find a wrapper by its command line.

The zygote ends when its request pipe closes: at the end of the run, or with a steering process that was killed.
Its own code, and a forked job's, are :mod:`b2batch.systems.zygote`'s.
"""

from __future__ import annotations

import json
import logging
import os
import select
import signal
import sys
import threading
import time
from typing import Any

from b2batch.engine.files import Launch
from b2batch.engine.processes import host_name, note_lives
from b2batch.systems import zygote

logger = logging.getLogger(__name__)

#: Seconds the steering process waits for the zygote to say it forked a job.
START_TIMEOUT = 10.0


def wanted(mode: str) -> bool:
    """Whether a run with ``local_start`` ``mode`` forks its local jobs from a zygote: ``fork``, or ``auto`` while
    this process has no thread but its main one (a fork copies only the thread that calls it, so a lock another
    thread holds stays held in the copy)."""
    if mode == "wrapper" or not hasattr(os, "fork") or sys.platform != "linux":
        return False
    return mode == "fork" or threading.active_count() == 1


class Zygote:
    """The steering side of a zygote: its pid and both pipes, the jobs it started and the ends it reported."""

    def __init__(self, pid: int, requests: int, replies: int) -> None:
        self.pid, self.requests, self.replies = pid, requests, replies
        self._buffer = b""
        self._started: dict[str, Any] = {}
        #: pid -> (exit code as Popen gives it, CPU seconds, peak RSS in KiB), until its ForkedProcess takes it
        self.ended: dict[int, tuple[int, float, int]] = {}
        self.gone = False
        self._lock = threading.Lock()

    @classmethod
    def start(cls) -> Zygote:
        """Fork the zygote (OSError: it could not be)."""
        requests_read, requests_write = os.pipe()
        replies_read, replies_write = os.pipe()
        for stream in (sys.stdout, sys.stderr):  # what this process buffered is printed once, by this process
            try:
                stream.flush()
            except Exception:
                pass
        pid = os.fork()
        if pid == 0:  # the zygote: it never returns into the steering process's code
            code = 0
            try:
                os.close(requests_write)
                os.close(replies_read)
                zygote.serve(requests_read, replies_write)
            except BaseException:
                code = 70
            finally:
                os._exit(code)
        os.close(requests_read)
        os.close(replies_write)
        os.set_blocking(replies_read, False)
        return cls(pid, requests_write, replies_read)

    def launch(self, job_id: str, launch: Launch, files: dict[str, str]) -> ForkedProcess:
        """Fork the job ``job_id`` (its wrapper's ``launch``, its ``files``: log folder, stdout, stderr,
        exit_code, setup_failed, folder); OSError when the zygote is gone or could not fork it."""
        request = {"job": job_id, "label": launch.label, "command": list(launch.command), "cwd": launch.working_dir,
                   "env": [list(pair) for pair in launch.env], "environ": dict(os.environ), **files}
        data = memoryview(json.dumps(request).encode() + b"\n")
        with self._lock:
            if self.gone:
                raise OSError("the zygote of this run's local jobs has ended")
            try:
                while data:
                    data = data[os.write(self.requests, data):]
            except OSError:
                self.gone = True
                raise
            deadline = time.monotonic() + START_TIMEOUT
            while job_id not in self._started:
                left = deadline - time.monotonic()
                if self.gone or left <= 0:
                    self._give_up()
                    raise OSError("the zygote of this run's local jobs did not answer")
                self._read(left)
            answer = self._started.pop(job_id)
        if isinstance(answer, str):
            raise OSError(answer)
        return ForkedProcess(self, answer, files["exit_code"])

    def _give_up(self) -> None:
        """The zygote did not answer (a fork hook of another library waiting on a thread the copy does not have,
        say): it is killed, so that it cannot fork the job later, which then starts from its wrapper once."""
        self.gone = True
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def collect(self, timeout: float = 0.0) -> None:
        """Read what the zygote reported (waiting up to ``timeout`` seconds for a first message)."""
        with self._lock:
            self._read(timeout)

    def _read(self, timeout: float) -> None:
        if self.gone:
            return
        if timeout > 0 and not select.select([self.replies], [], [], timeout)[0]:
            return
        while True:
            try:
                chunk = os.read(self.replies, 65536)
            except BlockingIOError:
                break
            if not chunk:
                self.gone = True
                break
            self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            message = json.loads(line)
            if "ended" in message:
                self.ended[message["ended"]] = (message["code"], message["cpu"], message["rss"])
            else:
                self._started[message["job"]] = message.get("pid", message.get("error"))

    def close(self) -> None:
        """End the zygote (the jobs it forked run on) and reap it."""
        with self._lock:
            if self.requests < 0:
                return
            os.close(self.requests)
            self.requests = -1
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            try:
                if os.waitpid(self.pid, os.WNOHANG)[0]:
                    break
            except ChildProcessError:
                break
            time.sleep(0.0005)  # (it ends within a millisecond or two of its pipe closing)
        else:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        os.close(self.replies)


class ForkedProcess:
    """A job the zygote forked, with the part of ``subprocess.Popen``'s interface the local system uses."""

    def __init__(self, zygote: Zygote, pid: int, exit_code_file: str) -> None:
        self.zygote, self.pid, self.exit_code_file = zygote, pid, exit_code_file
        self.returncode: int | None = None
        self.started = time.time()
        self.cpu, self.max_rss_kb = 0.0, 0

    def poll(self) -> int | None:
        if self.returncode is None:
            self.zygote.collect()
            self._take()
        return self.returncode

    def _take(self) -> None:
        ended = self.zygote.ended.pop(self.pid, None)
        if ended is not None:
            self.returncode, self.cpu, self.max_rss_kb = ended
        elif self.zygote.gone and not note_lives({"host": host_name(), "pid": self.pid,
                                                  "started": self.started}):
            # its zygote ended first, so no one reported how: its exit-code file says (none: it was killed)
            try:
                with open(self.exit_code_file) as f:
                    self.returncode = int(f.read().strip())
            except (OSError, ValueError):
                self.returncode = -1

    def wait(self, timeout: float | None = None) -> int:
        if not self.ends_within(timeout):
            import subprocess  # (Popen's exception; a steering process of forked jobs need not import subprocess)

            raise subprocess.TimeoutExpired(f"local job (pid {self.pid})", timeout or 0.0)
        return self.returncode  # type: ignore[return-value]

    def ends_within(self, timeout: float | None) -> bool:
        """Wait up to ``timeout`` seconds (None: until it ends) for the job to end; whether it did."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            left = 0.05 if deadline is None else min(0.05, deadline - time.monotonic())
            if left <= 0:
                return False
            if self.zygote.gone:
                time.sleep(left)
            else:
                self.zygote.collect(left)
        return True
