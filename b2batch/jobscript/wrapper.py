"""Renders a job's executable wrapper, and the one place where values are quoted for the shell.

The wrapper sends its own output to the task's log files, sources ``env_script``, exports ``env``, changes
into ``working_dir`` and runs ``executable`` on the node-side entry point for exactly one task. It writes
the job's exit code to a file, so a job that has left the scheduler's queue can still be judged.
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path
from typing import Any

from b2batch import paths
from b2batch.jobscript import containers
from b2batch.errors import SettingError
from b2batch.settings import get_setting
from b2batch.jobscript.templating import ENTRY_POINT, quote, render  # noqa: F401  (the wrapper's quoting and templates)

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _lookup(task: Any) -> Any:
    return lambda name: get_setting(name, task=task)


def executable_of(task: Any, lookup: Any = None) -> list[str]:
    """The ``executable`` setting as an argument list; default: the Python running the workflow, or
    ``python3`` of the image when the job runs in a container."""
    lookup = lookup or _lookup(task)
    value = lookup("executable")
    if value is None:
        return ["python3"] if containers.wanted(lookup) else [sys.executable]
    if isinstance(value, str):
        value = shlex.split(value)
    if not isinstance(value, (list, tuple)) or not value or not all(isinstance(v, str) for v in value):
        raise SettingError(f"Task {task}: the setting 'executable' must be a non-empty list of strings or a "
                           f"string, not {value!r}. Example: [\"python3\"] or \"/opt/venv/bin/python\".")
    return list(value)


def env_of(task: Any, lookup: Any = None) -> list[tuple[str, str]]:
    """The ``env`` setting as validated (name, value) pairs."""
    env = (lookup or _lookup(task))("env") or {}
    if not isinstance(env, dict):
        raise SettingError(f"Task {task}: the setting 'env' must be a dict of variable names to values, not "
                           f"{type(env).__name__}. Example: {{\"OMP_NUM_THREADS\": \"1\"}}.")
    for name in env:
        if not isinstance(name, str) or not _ENV_NAME.match(name):
            raise SettingError(f"Task {task}: {name!r} in the setting 'env' is not a valid environment "
                               f"variable name (letters, digits and _, not starting with a digit).")
    return [(name, str(value)) for name, value in env.items()]


def env_script_of(task: Any, lookup: Any = None) -> Path | None:
    """The ``env_script`` setting resolved to a path; an error when it names a file that is not there."""
    value = (lookup or _lookup(task))("env_script")
    if not value:
        return None
    script = paths.resolve(value)
    if not script.is_file():
        raise SettingError(f"Task {task}: the setting 'env_script' names {script}, which is not a file. Fix "
                           f"the path (relative paths are relative to {paths.base_dir()}) or unset it.")
    return script


def write_job_script(job_files: Any, owner: Any, label: str, lookup: Any, *, spec: dict[str, Any] | None = None,
                     command: list[str] | None = None, wrapper: bool = True, checkpoint: bool = False) -> None:
    """Write what a batch system runs for one job, the one place front-ends write a job's files: its spec
    (``job.json``, the unit of work, when given) and, unless ``wrapper`` is false (a unit that a pilot or bundle
    job runs), its executable wrapper. The wrapper runs ``command``, by default the node-side entry point on
    the spec, under the ``executable`` setting, with the settings ``lookup(name)`` of ``owner`` (named in errors
    as ``label``); a bad setting raises its SettingError before the wrapper is written."""
    if spec is not None:
        job_files.write_spec(spec)
    if not wrapper:
        return
    arguments = command if command is not None else [str(ENTRY_POINT), str(job_files.spec)]
    job_files.write_wrapper(render_job_wrapper(owner, label, lookup, job_files, [*executable_of(owner, lookup),
                                                                                  *arguments], checkpoint=checkpoint))


def render_wrapper(task: Any, job_files: Any) -> str:
    """The executable wrapper of ``task``'s job."""
    return render_job_wrapper(task, task.task_id, _lookup(task), job_files,
                              [*executable_of(task), str(ENTRY_POINT), str(job_files.spec)],
                              checkpoint=callable(getattr(task, "checkpoint", None)))


def job_wrapper(owner: Any, label: str, lookup: Any, job_files: Any, arguments: list[str]) -> str:
    """The executable wrapper of a job that runs the node-side entry point with ``arguments`` (under the
    ``executable`` setting), with the settings ``lookup(name)`` of ``owner``: the job-script maker a front-end
    gives its run (``RunConfig.job_wrapper``) for the worker jobs the engine makes."""
    return render_job_wrapper(owner, label, lookup, job_files,
                              [*executable_of(owner, lookup), str(ENTRY_POINT), *arguments])


def render_job_wrapper(owner: Any, label: str, lookup: Any, job_files: Any, command: list[str],
                       checkpoint: bool = False) -> str:
    """The executable wrapper of a job that runs ``command`` (``executable`` is prepended by the caller), with
    the settings ``lookup(name)`` of ``owner`` (named in errors); with ``checkpoint`` the batch system's warning
    (SIGUSR1, SIGUSR2) is passed on to the command, which saves its state and ends with exit code 75."""
    working_dir = paths.resolve(lookup("working_dir")) if lookup("working_dir") else paths.base_dir()
    env_script, env = env_script_of(owner, lookup), env_of(owner, lookup)
    container = containers.container_of(owner, lookup, job_files, working_dir, env_script)
    if container is not None:  # env_script and env apply inside the container
        command = container.wrap(command, lookup("shell"), env_script, env, job_files.setup_failed)
    return render(
        "executable_wrapper.sh.j2",
        shell=lookup("shell"),
        task_id=label,
        log_folder=job_files.log_folder,
        stdout=job_files.stdout,
        stderr=job_files.stderr,
        exit_code_file=job_files.exit_code,
        setup_failed_file=job_files.setup_failed,
        env_script=env_script,
        env=env,
        working_dir=working_dir,
        container=container,
        command=command,
        checkpoint=checkpoint,
    )
