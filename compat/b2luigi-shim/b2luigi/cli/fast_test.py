"""``b2luigi test``'s runner: one script run as a task (``FastTask``), with an optional input file that must exist
(``FastReqTask``), locally or as a job of a batch system. ``b2luigi.cli.runner`` offers these names.

The task runs through :func:`b2batch.luigi_frontend.workflow.process`, as any workflow does. A job rebuilds it by
running the same ``b2luigi test`` command again on the node (b2batch's way for tasks made in the workflow's main
script), so ``FastTask`` is a task of ``__main__``. ``task_cmd_additional_args`` carries b2luigi's own
encoding of the task for its ``batch-runner`` (what ``b2luigi.core.utils.create_cmd_from_task`` appends).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

from b2luigi.batch.workers import BatchSystems
from b2luigi.cli.errors import CliUserError
from b2luigi.cli.params import parse_kv_params, suggest
from b2luigi.core.settings import get_setting, set_setting
from b2luigi.core.utils import _UNSET
from b2batch import ExternalTask, LocalTarget, Task, requires
from b2batch import process
from b2batch import clear_setting
from b2batch.settings import settings_snapshot
from b2batch.systems import known_systems

#: ``subprocess`` too: b2luigi's ``b2luigi.cli.runner.subprocess`` is the module that runs the script (tests
#: replace its ``run`` there).
__all__ = ["_build_fast_req_task", "_build_fast_task", "_resolve_batch_system", "job_argv", "subprocess", "test_task"]

#: The module of the task classes: a job rebuilds them by running the command line again (see the module's text).
TASK_MODULE = "__main__"


def _resolve_batch_system(name: str) -> str:
    """``name`` if it names a batch system (b2luigi's, ``auto``, or one more that b2batch has, such as ``sge``);
    else a :class:`CliUserError` naming b2luigi's choices, with the closest one as a "did you mean"."""
    choices = [system.value for system in BatchSystems]
    if name in choices or name in known_systems():
        return name
    close = suggest(name, choices)
    hint = f" Did you mean {close!r}?" if close else ""
    raise CliUserError(f"Unknown batch system {name!r}.{hint} Valid choices: {', '.join(sorted(choices))}.")


def _build_fast_req_task(input_file: str) -> type:
    """An external task whose output is ``input_file`` at the path given (not below result_dir), under the key
    ``input_file``: the requirement of ``FastTask`` with ``-i``."""
    path = os.path.abspath(input_file)

    def output(self: Any) -> Iterator[dict[str, Any]]:
        yield {input_file: LocalTarget(path)}

    return type("FastReqTask", (ExternalTask,), {"output": output, "__module__": TASK_MODULE})


def _command_of(executable: str | None) -> list[str]:
    """The words that start the script: ``executable`` split as a shell would, or this Python."""
    if executable is None:
        return [sys.executable]
    try:
        words = shlex.split(executable)
    except ValueError as error:
        raise CliUserError(f"--executable {executable!r} could not be parsed: {error}") from None
    if not words:
        raise CliUserError(f"--executable {executable!r} is blank once split; give at least one token")
    return words


def _worker_args(script: str, output: str, output_path: str, input_file: str | None, force: bool,
                 literal_path: bool, extra_args: list[str], executable: str | None) -> list[str]:
    """b2luigi's ``batch-runner`` options for the task, each value quoted for the wrapper's shell line; the
    paths as resolved here (the job may start in another folder), ``-o`` as given without ``literal_path``."""
    args = ["--script", shlex.quote(script), "--output-file", shlex.quote(output_path if literal_path else output)]
    if input_file is not None:
        args += ["--input-file", shlex.quote(os.path.abspath(input_file))]
    if force:
        args.append("--force")
    args.append("--literal-path" if literal_path else "--no-literal-path")
    for arg in extra_args:
        args += ["--extra-arg", shlex.quote(arg)]
    if executable:
        args += ["--executable", shlex.quote(executable)]
    return args


def _input_path(task: Any, input_file: str) -> str:
    """The path of the requirement's ``input_file``: b2luigi lists an input under its file's name, b2batch under
    the output's key (the name as given, with any folder); either is found."""
    inputs = task.get_input_file_names()
    name = os.path.basename(input_file)
    return task.get_input_file_name(name if name in inputs else input_file)


def _build_fast_task(exec_script: str, output: str, input_file: str | None, force: bool, batch: bool,
                     extra_args: list[str], env_script: str | None = None, literal_path: bool = True,
                     executable: str | None = None) -> type:
    """The task that runs ``<executable or this Python> <script> -o <output> [-i <input>] [--] [extra_args]``
    (``--`` only with an ``executable`` and extra arguments) and fails when the script exits non-zero or
    leaves no output. Its output is ``output`` as a path (``literal_path``) or below result_dir; with
    ``force`` it has none, so it always runs. Its ``batch_system`` is ``local`` without ``batch``, ``auto``
    with it unless a ``batch_system`` setting was made (which then decides); ``env_script`` becomes its
    attribute (as an absolute path). A bad ``executable`` raises :class:`CliUserError`."""
    script = os.path.abspath(exec_script)
    output_path = os.path.abspath(output)
    command = _command_of(executable)

    def run(self: Any) -> None:
        # Without an output() (force) the path is the one add_to_output would give.
        path = output_path if literal_path else self._get_output_file_target(output).path
        argv = [*command, script, "-o", path]
        if input_file is not None:
            argv += ["-i", _input_path(self, input_file)]
        if extra_args:
            argv += [*(["--"] if executable else []), *extra_args]
        status = subprocess.run(argv).returncode
        if status != 0:
            raise RuntimeError(f"Script '{script}' exited with code {status}")
        if not os.path.exists(path):
            raise RuntimeError(f"Script '{script}' ran successfully but did not produce output '{output}'")

    attrs: dict[str, Any] = {"run": run, "__module__": TASK_MODULE,
                             "task_cmd_additional_args": _worker_args(script, output, output_path, input_file, force,
                                                                      literal_path, extra_args, executable)}
    # An attribute of the task outranks every setting: set only when the user chose nothing (with --batch).
    if not batch or get_setting("batch_system", default=_UNSET) is _UNSET:
        attrs["batch_system"] = "auto" if batch else "local"
    if env_script is not None:
        attrs["env_script"] = os.path.abspath(env_script)
    if not force:
        def outputs(self: Any) -> Iterator[dict[str, Any]]:
            yield {output: LocalTarget(output_path)} if literal_path else self.add_to_output(output)

        attrs["output"] = outputs
    return type("FastTask", (Task,), attrs)


def job_argv(exec_script: str, output: str, input_file: str | None, force: bool, extra_args: list[str],
             literal_path: bool, executable: str | None) -> list[str]:
    """The ``b2luigi test`` arguments that rebuild the same task in a job (paths resolved here; the settings
    travel with the job)."""
    argv = ["test", "-s", os.path.abspath(exec_script), "-o", os.path.abspath(output) if literal_path else output]
    if input_file is not None:
        argv += ["-i", os.path.abspath(input_file)]
    if force:
        argv.append("--force")
    argv.append("--literal-path" if literal_path else "--no-literal-path")
    if executable is not None:
        argv.append(f"--executable={executable}")
    return argv + (["--", *extra_args] if extra_args else [])


#: Settings of process() that differ for ``b2luigi test``: b2luigi's rule of one process() per script is not for
#: test_task (no script's process() call), and the run's result tells whether luigi scheduled and ran everything.
_RUN_SETTINGS = {"process_once": False, "process_returns_result": True}


@contextlib.contextmanager
def _for_this_run(argv: list[str]) -> Iterator[None]:
    """While ``b2luigi test`` runs its task: process() sees ``argv`` as the command line (the words a job needs to
    rebuild the task, none of them a flag of process()'s) and :data:`_RUN_SETTINGS`; both as before afterwards."""
    saved_argv = sys.argv
    had = settings_snapshot()["code"]
    sys.argv = [saved_argv[0] if saved_argv else "b2luigi", *argv]
    for key, value in _RUN_SETTINGS.items():
        set_setting(key, value)
    try:
        yield
    finally:
        sys.argv = saved_argv
        for key in _RUN_SETTINGS:
            if key in had:
                set_setting(key, had[key])
            else:
                clear_setting(key)


def _rerun_by_the_command() -> bool:
    """Whether this program is the ``b2luigi`` command (its console script, or a file calling its ``main``): what a
    job of ``test_task`` runs again to rebuild the task."""
    entry = getattr(sys.modules.get("__main__"), "main", None)
    return getattr(entry, "__module__", "").startswith(__name__.rpartition(".")[0])


#: What a job of test_task runs again when this program is not the ``b2luigi`` command: the command as a file.
COMMAND_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "entry", "b2luigi_command.py")


def test_task(exec_script: str, output: str, input_file: str | None, force: bool, batch: bool,
              extra_args: list[str], env_script: str | None = None, settings: list[str] | None = None,
              literal_path: bool = True, executable: str | None = None, batch_system: str | None = None) -> None:
    """Run ``exec_script`` as a task (see :func:`_build_fast_task`), after applying ``settings`` (``key=value``,
    JSON values) with ``set_setting``; ``batch_system`` (checked by :func:`_resolve_batch_system`) is set as the
    setting of that name and implies ``batch``. With ``input_file`` the task requires that file. Exits with
    status 1 when the task fails (luigi's ``scheduling_succeeded`` is false). Jobs rebuild the task by running the
    ``b2luigi`` command again (:data:`COMMAND_FILE` when this program is not the command) with the same arguments."""
    for key, value in parse_kv_params(settings or []).items():
        set_setting(key, value)
    if batch_system is not None:  # after --setting: the flag wins
        set_setting("batch_system", _resolve_batch_system(batch_system))
        batch = True
    set_setting("__batch_runner_use_cli", True)
    fast_task = _build_fast_task(exec_script, output, input_file, force, batch, extra_args, env_script,
                                 literal_path, executable)
    if input_file is not None:
        fast_task = requires(_build_fast_req_task(input_file))(fast_task)
    task = fast_task()
    argv = job_argv(exec_script, output, input_file, force, extra_args, literal_path, executable)
    rerun = {} if _rerun_by_the_command() else {"_job_script": COMMAND_FILE}
    with _for_this_run(argv):
        result = process(task, batch=batch, ignore_additional_command_line_args=True, exit_on_failure=False,
                         log_level="INFO", **rerun)
    # As b2luigi: status 1 when luigi did not schedule and run everything (a missing input is no failure there).
    if not result.scheduling_succeeded:
        raise SystemExit(1)
