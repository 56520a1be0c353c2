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
"""

from __future__ import annotations

import json
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any, NoReturn

from b2batch.engine.files import Launch, atomic_write
from b2batch.engine.processes import note_lives, process_started

logger = logging.getLogger(__name__)

#: Seconds the steering process waits for the zygote to say it forked a job.
START_TIMEOUT = 10.0
#: What the zygote imports before its first job: the node side of a pilot, and what a unit of calls loads.
PRELOAD = ("b2batch.engine.pilots.node_worker", "cloudpickle")
#: The signals a job starts with their defaults for (SIGINT: Python's KeyboardInterrupt, as in a fresh interpreter).
_DEFAULT_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2, signal.SIGCHLD, signal.SIGQUIT)


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
                _serve(requests_read, replies_write)
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
                    self.gone = True
                    raise OSError("the zygote of this run's local jobs did not answer")
                self._read(left)
            answer = self._started.pop(job_id)
        if isinstance(answer, str):
            raise OSError(answer)
        return ForkedProcess(self, answer, files["exit_code"])

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
        elif self.zygote.gone and not note_lives({"host": socket.gethostname(), "pid": self.pid,
                                                  "started": self.started}):
            # its zygote ended first, so no one reported how: its exit-code file says (none: it was killed)
            try:
                with open(self.exit_code_file) as f:
                    self.returncode = int(f.read().strip())
            except (OSError, ValueError):
                self.returncode = -1

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            left = 0.05 if deadline is None else min(0.05, deadline - time.monotonic())
            if left <= 0:
                raise subprocess.TimeoutExpired(f"local job (pid {self.pid})", timeout or 0.0)
            if self.zygote.gone:
                time.sleep(left)
            else:
                self.zygote.collect(left)
        return self.returncode  # type: ignore[return-value]


# --- the zygote ----------------------------------------------------------------------------------------------


def _serve(requests: int, replies: int) -> None:
    """The zygote's loop: fork a job for each request, report each child's end; return when requests close."""
    os.setsid()  # no terminal's signals; a job's session is its own anyway
    _detach(keep={requests, replies})
    _fresh_logging()
    for name in PRELOAD:
        try:
            __import__(name)
        except Exception:  # the job imports it again and fails with the reason
            pass
    import gc

    gc.freeze()  # the objects of this copy stay where they are: a job's collections touch none of their pages
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_read, False)
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    inherited = (requests, replies, wake_read, wake_write)
    codes: dict[int, str] = {}  # each running child's exit-code file
    buffer = b""
    while True:
        ready = select.select([requests, wake_read], [], [])[0]
        if wake_read in ready:
            while True:
                try:
                    if not os.read(wake_read, 4096):
                        break
                except BlockingIOError:
                    break
            _reap(replies, codes)
        if requests in ready:
            chunk = os.read(requests, 65536)
            if not chunk:
                break
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                request = json.loads(line)
                try:
                    pid = os.fork()
                except OSError as e:
                    _say(replies, {"job": request["job"], "error": f"could not fork the job: {e}"})
                    continue
                if pid == 0:
                    _run_job(request, inherited)
                codes[pid] = request["exit_code"]
                _say(replies, {"job": request["job"], "pid": pid})
    _reap(replies, codes)


def _say(replies: int, message: dict[str, Any]) -> None:
    data = memoryview(json.dumps(message).encode() + b"\n")
    while data:
        data = data[os.write(replies, data):]


def _reap(replies: int, codes: dict[int, str]) -> None:
    """Report every child that ended; a child a signal killed gets the exit code its wrapper would write."""
    while True:
        try:
            pid, status, used = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if not pid:
            return
        code = os.waitstatus_to_exitcode(status)
        exit_code_file = codes.pop(pid, None)
        if code < 0 and exit_code_file is not None and not os.path.exists(exit_code_file):
            try:
                atomic_write(Path(exit_code_file), f"{128 - code}\n")
            except OSError:
                pass
        _say(replies, {"ended": pid, "code": code, "cpu": used.ru_utime + used.ru_stime, "rss": used.ru_maxrss})


def _detach(keep: set[int]) -> None:
    """Point every inherited descriptor but ``keep`` at /dev/null: the zygote holds none of the steering
    process's pipes, sockets or files open (its number stays taken, so no object of the copy that closes it
    closes a descriptor of a job)."""
    null = os.open(os.devnull, os.O_RDWR)
    for name in os.listdir("/proc/self/fd"):
        descriptor = int(name)
        if descriptor in keep or descriptor == null:
            continue
        try:
            os.dup2(null, descriptor, inheritable=descriptor < 3)
        except OSError:
            pass
    os.close(null)


def _fresh_logging() -> None:
    """Logging as a fresh interpreter has it: the steering process's handlers (its files, its terminal) and
    levels are not a job's."""
    root = logging.getLogger()
    loggers = [root, *(item for item in logging.Logger.manager.loggerDict.values() if isinstance(item, logging.Logger))]
    for each in loggers:
        each.handlers.clear()
        each.setLevel(logging.NOTSET)
        each.disabled = False
        each.propagate = True
    root.setLevel(logging.WARNING)
    logging.disable(logging.NOTSET)


def _run_job(request: dict[str, Any], inherited: tuple[int, ...]) -> NoReturn:
    """In the forked child: do what the job's wrapper does, run the entry point, end with its exit code."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        for descriptor in inherited:
            os.close(descriptor)
        os.setsid()
        for signum in _DEFAULT_SIGNALS:
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        _note_process(request["folder"])
        _own_logs(request)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        print(f"b2batch: job of task {request['label']} started on {socket.gethostname()} at "
              f"{stamp[:-2]}:{stamp[-2:]}", flush=True)
        os.environ.clear()
        os.environ.update(request["environ"])
        os.environ.update(dict(request["env"]))
        try:
            os.chdir(request["cwd"])
        except OSError:
            reason = f"cannot change into working_dir {request['cwd']}"
            print(f"b2batch: {reason}", file=sys.stderr, flush=True)
            with open(request["setup_failed"], "w") as marker:
                marker.write(reason + "\n")
            code = 3
        else:
            code = _entry(request["command"])
    except SystemExit as e:
        code = _exit_code(e.code)
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        _end(request, code)


def _entry(command: list[str]) -> int:
    """Run the node-side entry point file as ``python <command>`` would (its folder first on sys.path)."""
    import runpy

    sys.argv = list(command)
    sys.path.insert(0, os.path.dirname(command[0]))
    try:
        runpy.run_path(command[0], run_name="__main__")
    except SystemExit as e:
        return _exit_code(e.code)
    return 0


def _exit_code(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=sys.stderr)
    return 1


def _note_process(folder: str) -> None:
    note = {"host": socket.gethostname(), "pid": os.getpid(), "started": process_started(os.getpid())}
    try:
        atomic_write(Path(folder) / "process", json.dumps(note) + "\n")
    except OSError:
        pass


def _own_logs(request: dict[str, Any]) -> None:
    """The job's stdout and stderr files (appended to) as this process's, stdin from /dev/null."""
    import io

    os.makedirs(request["log_folder"], exist_ok=True)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    for descriptor, name in ((1, "stdout"), (2, "stderr")):
        opened = os.open(request[name], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(opened, descriptor)
        os.close(opened)
    sys.stdin = open(0, closefd=False)  # noqa: SIM115 (the process's own, as a fresh interpreter's)
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), line_buffering=True, write_through=True)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), line_buffering=True, write_through=True,
                                  errors="backslashreplace")


def _end(request: dict[str, Any], code: int) -> NoReturn:
    """Flush, note the peak RSS and the exit code as the entry point and wrapper do, and leave at once (no
    handler of the steering process's copy runs)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    try:
        import resource

        peak = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                   resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
        with open(os.path.join(request["folder"], "peak_rss"), "w") as f:
            f.write(f"{peak * 1024}\n")
        atomic_write(Path(request["exit_code"]), f"{code}\n")
    except BaseException:
        pass
    os._exit(code)
