"""Where a worker's units run: a long-lived child process (a *runner*) that runs one unit after another, or a
child forked for one unit alone.

Forking the ~40 MB worker for every unit cost 10-15 ms of CPU per unit (the fork, then the copy-on-write
faults of the child); a runner is forked once and runs units in turn, as the workers of HyperQueue, Parsl or
``multiprocessing.Pool`` do. The worker sends it each unit over a pipe and gets back the unit's exit code and
CPU time. A unit still cannot take another down:

- a unit that kills its process (a segfault, ``os._exit``, a signal) ends only the runner: the worker records
  the unit as failed with that exit code and forks a fresh runner for the next unit;
- the runner is also replaced after a unit that was stopped by a signal (cancelled; it unwound), that left
  threads running, and after :data:`RUNNER_UNITS` units (what a unit's code leaks stays bounded);
- each unit's stdout and stderr (file descriptors 1 and 2, so also its subprocesses') go to its own logs;
- each unit's CPU time is its own (its runner's and its waited-for children's during the unit); its peak RSS
  in ``usage.json`` is its runner's peak so far (an earlier unit's, where that was higher).

What a unit changes in its process is put back after it, before the next unit runs: ``os.environ``, the
working directory, ``sys.argv``, ``sys.path``, ``sys.stdout``/``sys.stderr``, the umask, the root logger's
handlers and level, and the handlers of the stop signals. What is not put back: modules it imported (they
stay loaded, as a cache), module-level variables it changed, resource limits. A front-end resets its own
state around each unit (the luigi front-end: task classes' attributes and luigi's instance cache). A unit
that must have a fresh process of its own says ``"fresh_process": true``; ``{"command": [...]}`` units
always get one (they replace their process).
"""

from __future__ import annotations

import ctypes  # here, not in each unit's child: importing it there cost ~4 ms of CPU per unit
import importlib
import json
import logging
import os
import pickle
import resource
import select
import signal
import struct
import sys
import threading
import time
import traceback
from typing import Any

from b2batch.engine.processes import host_name, local_timestamp
from b2batch.engine.unwinding import unwind_on_sigterm

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
#: Units a runner runs before it is replaced by a fresh one.
RUNNER_UNITS = 1000
_HEADER = struct.Struct("!I")
#: In a runner process: what its running unit handed to the worker (:func:`hand_result`); None elsewhere.
_hand_over: dict[str, Any] | None = None


def hand_result(result: dict[str, Any] | None) -> bool:
    """Give the running unit's result (a small JSON-able dict, or None: the unit has none) to the worker that
    runs it, which puts it into the unit's line of its log, where the steering process reads it: no result file
    per unit. False when this process is no runner (a unit in a process of its own, a job of its own): the unit
    writes its result file then."""
    if _hand_over is None:
        return False
    try:
        json.dumps(result)  # it goes into a JSON line
    except (TypeError, ValueError):
        return False
    _hand_over["result"] = result
    return True


def run_unit(unit: dict[str, Any]) -> int:
    """Run one unit in this (child) process; its exit code."""
    for module in unit.get("preload", []):
        importlib.import_module(module)  # loaded by the worker already, unless that failed
    if "command" in unit:
        command = [str(part) for part in unit["command"]]
        os.execvp(command[0], command)
    module, _, name = unit["call"].partition(":")
    function = getattr(importlib.import_module(module), name)
    if "inline" in unit:  # its input, carried in its entry rather than in a file (engine.job.Job.inline)
        import base64

        code = function(*unit.get("args", []), inline=base64.b64decode(unit["inline"]))
    else:
        code = function(*unit.get("args", []))
    return int(code or 0)


def needs_fresh_process(unit: dict[str, Any]) -> bool:
    """Whether a unit runs in a child of its own rather than in the worker's runner."""
    return "command" in unit or bool(unit.get("fresh_process"))


def _run_logged(entry: dict[str, Any], job_id: str, host: str) -> int:
    """Run the unit of ``entry`` with fds 1 and 2 on its logs (already redirected); its exit code (0-255)."""
    try:
        banner = (f"b2batch: {entry.get('name', entry['key'])} started in job {job_id} on {host} "
                  f"at {local_timestamp()}")
        print(banner, flush=True)
        if "stdout" not in entry["files"]:  # in its worker's logs: its part of stderr starts with the line too
            print(banner, file=sys.stderr, flush=True)
        code = run_unit(entry["unit"])
    except SystemExit as e:
        if e.code is not None and not isinstance(e.code, int):
            print(e.code, file=sys.stderr)  # as Python does
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # noqa: BLE001 - the unit reports whatever ended it
        traceback.print_exc()
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 - a unit may have closed or replaced it
                pass
    return code & 0xFF  # as the exit status of a process of its own would be


def _redirect(files: dict[str, str]) -> None:
    """Point file descriptors 1 and 2 at the unit's stdout and stderr logs (appending; their folder is made). A
    unit whose entry names none writes into its worker's logs (the worker notes which part is the unit's)."""
    if "stdout" not in files:
        return
    for fd, path in ((1, files["stdout"]), (2, files["stderr"])):
        try:
            log = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        except FileNotFoundError:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            log = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(log, fd)
        os.close(log)


def _child_setup(parent: int) -> None:
    os.setpgid(0, 0)  # a cancelled unit is stopped with everything it started
    _die_with_parent(parent)
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_DFL)


def run_forked(entry: dict[str, Any], job_id: str, parent: int, mask: set[int]) -> None:
    """Run the unit ``entry`` in this forked child, with its own logs; exit with its exit code."""
    code = 1
    try:
        _child_setup(parent)
        # Stopped, the unit unwinds (e.g. removing its temporary outputs) and exits with 128 + the signal.
        unwind_on_sigterm()
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        _redirect(entry["files"])
        code = _run_logged(entry, job_id, host_name())
    except BaseException:  # noqa: BLE001 - whatever happens, the child ends here
        traceback.print_exc()
    finally:
        os._exit(code)


class _Baseline:
    """What a runner's process looked like before its first unit, to put back after each unit."""

    def __init__(self) -> None:
        self.environ = dict(os.environ)
        self.raw_environ = dict(_raw(os.environ))
        self.cwd = os.getcwd()
        self.argv = list(sys.argv)
        self.path = list(sys.path)
        self.streams = (sys.stdout, sys.stderr)
        self.umask = os.umask(0o022)
        os.umask(self.umask)
        root = logging.getLogger()
        self.handlers, self.level = list(root.handlers), root.level
        self.threads = threading.active_count()

    def restore(self) -> None:
        if _raw(os.environ) != self.raw_environ:
            for name in [name for name in os.environ if name not in self.environ]:
                del os.environ[name]
            for name, value in self.environ.items():
                if os.environ.get(name) != value:
                    os.environ[name] = value
        try:
            cwd: str | None = os.getcwd()
        except OSError:  # the unit removed its working directory
            cwd = None
        if cwd != self.cwd:
            os.chdir(self.cwd)
        if sys.argv != self.argv:
            sys.argv[:] = self.argv
        if sys.path != self.path:
            sys.path[:] = self.path
        sys.stdout, sys.stderr = self.streams
        os.umask(self.umask)
        root = logging.getLogger()
        if root.handlers != self.handlers or root.level != self.level:
            root.handlers[:] = self.handlers
            root.setLevel(self.level)

    def misbehaved(self) -> bool:
        """Whether the unit left what cannot be put back: threads that still run (they could write into the next
        unit's logs), or the process's stdout or stderr closed."""
        return threading.active_count() > self.threads or any(stream.closed for stream in self.streams)


def _raw(environ: Any) -> Any:
    """``os.environ`` as the bytes mapping it keeps (compared without decoding every value), else itself."""
    return getattr(environ, "_data", environ)


def _max_rss(children: bool) -> int:
    """Peak RSS in KiB: this process's, or its waited-for children's where larger."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return max(rss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) if children else rss


def _serve(requests: int, replies: int, job_id: str, parent: int, mask: set[int]) -> None:
    """The runner's loop: run each unit the worker sends, answer with its exit code, CPU time and peak RSS (and
    the result it handed over, if it did); end when the worker closes the pipe or the runner is to be
    replaced."""
    global _hand_over
    _hand_over = handed = {}
    _child_setup(parent)
    unwind_on_sigterm()  # also while it waits for a unit: a SIGTERM then ends it
    handlers = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    baseline = _Baseline()
    saved = os.dup(1), os.dup(2)
    reader = os.fdopen(requests, "rb", buffering=0)
    host = host_name()
    for served in range(1, RUNNER_UNITS + 1):
        entry = _receive(reader)
        if entry is None:
            return
        before = os.times()
        handed.clear()
        try:
            _redirect(entry["files"])
            code = _run_logged(entry, job_id, host)
        except OSError:  # its logs cannot be opened
            traceback.print_exc()
            code = 1
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            stopped = signal.getsignal(signal.SIGTERM) is signal.SIG_IGN  # it was stopped and unwound
            for signum, handler in handlers.items():
                if signal.getsignal(signum) is not handler:
                    signal.signal(signum, handler)
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            baseline.restore()
        after = os.times()
        cpu = after.user + after.system - before.user - before.system
        waited = after.children_user + after.children_system - before.children_user - before.children_system
        retire = stopped or served == RUNNER_UNITS or baseline.misbehaved()
        _send(replies, {"code": code, "cpu": cpu + waited, "max_rss": _max_rss(waited > 0), "retire": retire,
                        **handed})
        if retire:
            return


def _send(fd: int, message: Any) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view):]


def _read_exactly(reader: Any, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        chunk = reader.read(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _receive(reader: Any) -> Any:
    """The next message on the pipe, or None when it was closed."""
    header = _read_exactly(reader, _HEADER.size)
    if header is None:
        return None
    data = _read_exactly(reader, _HEADER.unpack(header)[0])
    return None if data is None else pickle.loads(data)


class Runner:
    """The worker's side of a runner process: start it, hand it units, read their outcomes, end it."""

    def __init__(self, job_id: str) -> None:
        self.job_id = job_id
        self.pid: int | None = None
        self.handle: int | None = None  # a pidfd of the runner (Linux), to see it die
        self._requests = -1
        self._replies: Any = None
        self.reported_cpu = 0.0  # CPU seconds of its units already reported (for a runner that dies)
        #: What its last unit handed over ({"result": ...}), from its answer; empty when it handed nothing.
        self.handed: dict[str, Any] = {}

    def start(self, parent: int, mask: set[int]) -> None:
        """Fork the runner (with the stop signals blocked by the caller: ``mask`` is the mask to restore)."""
        down_read, down_write = os.pipe()
        up_read, up_write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the runner: never returns
            code = 0
            try:
                os.close(down_write)
                os.close(up_read)
                _serve(down_read, up_write, self.job_id, parent, mask)
            except BaseException:  # noqa: BLE001 - e.g. a stop signal while it waited for a unit
                code = 1
            finally:
                os._exit(code)
        os.close(down_read)
        os.close(up_write)
        self.pid, self._requests, self.reported_cpu = pid, down_write, 0.0
        self._replies = os.fdopen(up_read, "rb", buffering=0)
        try:
            self.handle = os.pidfd_open(pid)
        except (AttributeError, OSError):
            self.handle = None

    def alive(self) -> bool:
        """Whether the runner still runs (one that ended is reaped and forgotten)."""
        if self.pid is None:
            return False
        done, _ = os.waitpid(self.pid, os.WNOHANG)
        if done:
            self._forget()
            return False
        return True

    def send(self, entry: dict[str, Any]) -> None:
        self.handed = {}
        _send(self._requests, entry)

    def waitables(self) -> list[Any]:
        return [self._replies, *([self.handle] if self.handle is not None else [])]

    def reply(self) -> dict[str, Any] | None:
        """The outcome of the unit it ran, when it answered; None when it ended instead (reap it)."""
        message = _receive(self._replies)
        if message is not None:
            self.reported_cpu += message["cpu"]
            self.handed = {"result": message["result"]} if "result" in message else {}
        return message

    def reap(self) -> tuple[int, Any]:
        """Wait for the runner that ended; its wait status and resource usage (of its whole life)."""
        assert self.pid is not None
        _, status, usage = os.wait4(self.pid, 0)
        self._forget()
        return status, usage

    def close(self, grace: float = 5.0) -> None:
        """End the runner: close its pipe (it ends when it next waits for a unit); SIGKILL after ``grace``."""
        if self.pid is None:
            return
        pid = self.pid
        try:
            os.close(self._requests)
        except OSError:
            pass
        self._requests = -1
        deadline = time.monotonic() + grace
        pause = 0.0005
        while time.monotonic() < deadline:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                self._forget()
                return
            if self.handle is not None:  # its pidfd turns readable when it ends: no pause to wait out
                select.select([self.handle], [], [], max(0.0, deadline - time.monotonic()))
            else:
                time.sleep(pause)
                pause = min(pause * 2, 0.005)
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
        os.waitpid(pid, 0)
        self._forget()

    def forget(self) -> None:
        """The runner was reaped by someone else (the worker stopped it)."""
        self._forget()

    def _forget(self) -> None:
        for fd in (self._requests, self.handle):
            if fd is not None and fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        if self._replies is not None:
            self._replies.close()
        self.pid, self.handle, self._requests, self._replies = None, None, -1, None


def _die_with_parent(parent: int) -> None:
    """Linux: the unit is killed when its worker dies (SIGKILL, OOM), so that it never runs on while the
    steering process gives it to another worker."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the worker died before prctl took effect
            os._exit(137)
    except (OSError, AttributeError):
        pass
