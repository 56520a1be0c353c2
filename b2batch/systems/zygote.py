"""The zygote of a run's forked local jobs (:mod:`b2batch.systems.local_forks` is its steering side): its loop,
which forks a job for each request on its pipe and reports each child's end on the other, and what a forked job
does before and after the node-side entry point, as its wrapper would (``executable_wrapper.sh.j2``).

Everything here runs in a forked copy of the steering process and leaves with ``os._exit``: no handler, atexit
function or finalizer of the steering process's copy runs in it.
"""

from __future__ import annotations

import json
import logging
import os
import select
import signal
import sys
import traceback
from pathlib import Path
from typing import Any, NoReturn

from b2batch.engine import collector
from b2batch.engine.files import atomic_write
from b2batch.engine.processes import host_name, local_timestamp, process_started

#: What the zygote imports before its first job: the node side of a pilot, what a unit of calls loads, and what
#: runs the entry point (runpy imports pkgutil on its first run_path).
PRELOAD = ("b2batch.engine.pilots.node_worker", "cloudpickle", "runpy", "pkgutil")
#: The signals a job starts with their defaults for (SIGINT: Python's KeyboardInterrupt, as in a fresh interpreter).
_DEFAULT_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2, signal.SIGCHLD, signal.SIGQUIT)


def serve(requests: int, replies: int) -> None:
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

    collector.as_before()  # a job's collector as in the process before its runs steered (engine.collector)
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
        print(f"b2batch: job of task {request['label']} started on {host_name()} at {local_timestamp()}",
              flush=True)
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
    note = {"host": host_name(), "pid": os.getpid(), "started": process_started(os.getpid())}
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
