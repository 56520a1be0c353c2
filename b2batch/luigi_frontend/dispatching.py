"""``@dispatch`` and ``DispatchableTask``: a task's ``run()`` in a child process of its own.

A crash of the child (a segmentation fault in a library, ``os._exit``, the out-of-memory killer) fails the
task with an error naming the signal or the exit status; the workflow goes on. Locally the child's stdout
and stderr go to the task's log files, ``<log_dir>/<parameters>/<TaskFamily>/stdout`` and ``stderr``; in a
batch job they stay the job's, which are those files already. With ``--test`` (or the setting
``_dispatch_local_execution``, b2luigi's name) ``run()`` runs in the process itself, output to the terminal.
As in b2luigi, the child gets the task's environment settings: ``env_script`` is sourced (by bash, its exported
variables taken over) and ``env`` exported on top::

    class Reconstruct(b2batch.Task):
        @b2batch.dispatch
        def run(self):
            call_a_library_that_may_crash()
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
import sys
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from b2batch.jobscript import base_folder
from b2batch.errors import B2BatchError
from b2batch.luigi_frontend import flags, layout
from b2batch.luigi_frontend.job_on_node import node_job
from b2batch.luigi_frontend.task_on_node import active_spec
from b2batch.luigi_frontend.task import Task
from b2batch.settings import get_setting, profiled_error

F = TypeVar("F", bound=Callable[..., Any])

#: Exit status of the child when ``run()`` raised (the traceback is in its stderr).
RAISED = 1


class DispatchError(B2BatchError, RuntimeError):
    """The child process that ran a dispatched ``run()`` failed or was killed."""


def _in_a_job() -> bool:
    return active_spec() is not None


def _writes_to(logs: tuple[Path, Path]) -> bool:
    """Whether this process's stderr is the file ``logs[1]`` (a unit with log files of its own)."""
    try:
        return os.path.samestat(os.fstat(2), os.stat(logs[1]))
    except OSError:
        return False


def _runs_in_place(task: Any) -> bool:
    """``--test`` (or ``_dispatch_local_execution``): no child process, output to the terminal."""
    if get_setting("_dispatch_local_execution", default=False, task=task):
        return True
    args, _rest = flags.parser().parse_known_args(sys.argv[1:])  # process() checked the flags already
    return bool(args.test)


def log_files(task: Any) -> tuple[Path, Path]:
    """The task's stdout and stderr log files (as b2luigi lays them out, and as b2batch's jobs write them)."""
    folder = layout.log_folder(task)
    return folder / "stdout", folder / "stderr"


def dispatch(run: F) -> F:
    """Decorate ``run()`` so that it runs in a child process: a crash of the child fails the task cleanly."""

    @functools.wraps(run)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _runs_in_place(self):
            return run(self, *args, **kwargs)
        logs: tuple[Path, Path] | None = log_files(self)
        if _in_a_job() and not _writes_to(logs):  # its unit writes into its worker's logs (unit_logs "pilot")
            logs = None
        as_b2luigi = bool(get_setting("b2luigi_texts", task=self))
        try:  # in a job (or a pilot's task process) stdout and stderr are these files already
            environment = _environment_logged(self, logs if as_b2luigi and not _in_a_job() else None)
            run_in_child(lambda: run(self, *args, **kwargs), logs, describe=str(self), redirect=not _in_a_job(),
                         environment=environment, quote=not as_b2luigi)
        except DispatchError:
            if as_b2luigi:  # b2luigi's note on stdout names the log folder; the error only says what happened
                layout.print_b2luigi_failure(self)
            raise
        return None

    return wrapper  # type: ignore[return-value]


class DispatchableTask(Task):
    """A task whose work, in :meth:`process`, runs in a child process (see :func:`dispatch`). Override
    ``process()``, not ``run()``."""

    def process(self) -> None:
        """The task's work; runs in a child process."""
        raise NotImplementedError(f"{type(self).__name__} must override process() (not run()).")

    def run(self) -> None:
        dispatch(type(self).process)(self)


def _environment_logged(task: Any, logs: tuple[Path, Path] | None) -> dict[str, str]:
    """:func:`child_environment`; when its ``env_script`` fails and ``logs`` are given, the task's logs hold
    the error (an empty stdout, the message in stderr), as b2luigi's child leaves them when its wrapper's
    ``source`` fails."""
    try:
        return child_environment(task)
    except DispatchError as error:
        if logs is not None:
            logs[0].parent.mkdir(parents=True, exist_ok=True)
            logs[0].write_text("")
            logs[1].write_text(f"{error}\n")
        raise


def child_environment(task: Any) -> dict[str, str]:
    """The variables a dispatched child of ``task`` sets: those its setting ``env_script`` exports (the script
    sourced by bash in the task's environment), then its setting ``env`` (in the task's job: the values its job
    was made with, which its wrapper used too). A script that fails raises :class:`DispatchError` naming it, its
    exit status and the end of its stderr."""
    environment: dict[str, str] = {}
    job = node_job(task)
    script = job.config["env_script"] if job is not None else get_setting("env_script", task=task)
    if script:
        path = base_folder.resolve(script)
        done = subprocess.run(["bash", "-c", 'source "$0" >&2 && env -0', str(path)], capture_output=True,
                              check=False, cwd=base_folder.base_dir())
        if done.returncode != 0:
            tail = done.stderr.decode(errors="replace").strip()[-2000:]
            raise profiled_error(DispatchError)(
                f"{task}: the setting env_script is {script!r}, and sourcing {path} for the dispatched run() "
                f"failed with exit status {done.returncode}{': ' + tail if tail else ''}. Fix the script, or "
                f"unset env_script.")
        for entry in done.stdout.split(b"\0"):
            name, equals, value = entry.decode(errors="surrogateescape").partition("=")
            if equals and os.environ.get(name) != value and name not in ("_", "SHLVL", "PWD", "OLDPWD"):
                environment[name] = value
    env = job.config["env"] if job is not None else get_setting("env", task=task)
    environment.update({str(k): str(v) for k, v in (env or {}).items()})
    return environment


def run_in_child(function: Callable[[], Any], logs: tuple[Path, Path] | None, describe: str,
                 redirect: bool = True, environment: dict[str, str] | None = None, quote: bool = True) -> None:
    """Call ``function`` in a forked child, its stdout and stderr appended to ``logs`` (if given and
    ``redirect``; else the child keeps the streams, which are ``logs`` in a job); raise
    :class:`DispatchError` when the child does not end with status 0, naming ``logs``. ``environment``:
    variables the child sets before it calls ``function``; ``quote``: the error quotes the end of the child's
    stderr."""
    if logs is not None and redirect:
        for log in logs:
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_bytes(b"")  # each run starts with empty logs, as a job does
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # "fork() of a multi-threaded process"
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child (its coverage is not collected)
        os.environ.update(environment or {})
        _child(function, logs if redirect else None)
    try:
        _pid, status = os.waitpid(pid, 0)
    except BaseException:  # interrupted: the child must not outlive the task
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        os.waitpid(pid, 0)
        raise
    _raise_for(status, describe, logs, quote)


def _raise_for(status: int, describe: str, logs: tuple[Path, Path] | None, quote: bool) -> None:
    """Raise :class:`DispatchError` for the child's wait ``status`` unless it ended with 0: b2batch's message
    (what happened, where the output is), or under the b2luigi profile b2luigi's ``Execution failed with return
    code N`` (N negative for a signal, as ``subprocess`` gives it)."""
    code = os.waitstatus_to_exitcode(status)
    if code and get_setting("b2luigi_texts"):
        raise profiled_error(DispatchError)(f"Execution failed with return code {code}")
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        raise profiled_error(DispatchError)(f"{describe}: the dispatched run() was killed by signal {number} "
                            f"({_signal_name(number)}){_where(logs, quote)}")
    if code == RAISED:
        raise profiled_error(DispatchError)(f"{describe}: the dispatched run() raised an exception"
                                            f"{_where(logs, quote)}")
    if code:
        raise profiled_error(DispatchError)(f"{describe}: the dispatched run() exited with status {code}"
                                            f"{_where(logs, quote)}")


def _child(function: Callable[[], Any], logs: tuple[Path, Path] | None) -> None:  # pragma: no cover
    code = 0
    try:
        if logs is not None:
            for fd, log in zip((1, 2), logs):
                handle = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                os.dup2(handle, fd)
                os.close(handle)
            # Python-level writes too (sys.stdout may be another file, e.g. under pytest).
            sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
            sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
        function()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else RAISED)
    except BaseException:
        traceback.print_exc()
        code = RAISED
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return "unknown signal"


#: How much of the end of a failed child's stderr is read for the last lines of the error message.
_TAIL_BYTES = 16 * 1024


def _where(logs: tuple[Path, Path] | None, quote: bool = True) -> str:
    """Where the child's output is, with the end of its stderr (if ``quote``)."""
    if logs is None:
        return "; its output is in the job's log files."
    if not quote:
        return f"; its output is in {logs[0]} and {logs[1]}."
    try:
        with open(logs[1], "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - _TAIL_BYTES))  # a long log: only its end is read
            tail = "\n".join(f.read().decode(errors="replace").splitlines()[-10:]).rstrip()
    except OSError:
        tail = ""
    where = f"; its output is in {logs[0]} and {logs[1]}"
    return where + (f"; the end of its stderr:\n{tail}" if tail else ".")
