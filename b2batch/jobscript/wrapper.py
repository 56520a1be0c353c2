"""Renders a job's executable wrapper, and the one place where values are quoted for the shell.

The wrapper sends its own output to the task's log files, sources ``env_script``, exports ``env``, changes
into ``working_dir`` and runs ``executable`` on the node-side entry point for exactly one task. It writes
the job's exit code to a file, so a job that has left the scheduler's queue can still be judged.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shlex
import sys
from pathlib import Path
from typing import Any

from b2batch.jobscript import base_folder
from b2batch.jobscript import skeletons
from b2batch.jobscript.container_choice import wanted as wants_container
from b2batch.engine.files import Launch
from b2batch.errors import SettingError
from b2batch.jobscript.templating import ENTRY_POINT, quote, render  # noqa: F401  (the wrapper's quoting and templates)

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def executable_of(task: Any, config: Any) -> list[str]:
    """The ``executable`` setting as an argument list; default: the Python running the workflow, or
    ``python3`` of the image when the job runs in a container."""
    value = config["executable"]
    if value is None:
        return ["python3"] if wants_container(config) else [sys.executable]
    if isinstance(value, str):
        value = shlex.split(value)
    if not isinstance(value, (list, tuple)) or not value or not all(isinstance(v, str) for v in value):
        raise SettingError(f"Task {task}: the setting 'executable' must be a non-empty list of strings or a "
                           f"string, not {value!r}. Example: [\"python3\"] or \"/opt/venv/bin/python\".")
    return list(value)


def env_of(task: Any, config: Any) -> list[tuple[str, str]]:
    """The ``env`` setting as validated (name, value) pairs."""
    env = config["env"] or {}
    if not isinstance(env, dict):
        raise SettingError(f"Task {task}: the setting 'env' must be a dict of variable names to values, not "
                           f"{type(env).__name__}. Example: {{\"OMP_NUM_THREADS\": \"1\"}}.")
    for name in env:
        if not isinstance(name, str) or not _ENV_NAME.match(name):
            raise SettingError(f"Task {task}: {name!r} in the setting 'env' is not a valid environment "
                               f"variable name (letters, digits and _, not starting with a digit).")
    return [(name, str(value)) for name, value in env.items()]


def env_script_of(task: Any, config: Any) -> Path | None:
    """The ``env_script`` setting resolved to a path; an error when it names a file that is not there."""
    value = config["env_script"]
    if not value:
        return None
    script = base_folder.resolve(value)
    if not script.is_file():
        raise SettingError(f"Task {task}: the setting 'env_script' names {script}, which is not a file. Fix "
                           f"the path (relative paths are relative to {base_folder.base_dir()}) or unset it.")
    return script


def write_job_script(job_files: Any, owner: Any, label: str, config: Any, *, spec: dict[str, Any] | None = None,
                     command: list[str] | None = None, wrapper: bool = True, checkpoint: bool = False) -> None:
    """Write what a batch system runs for one job, the one place front-ends write a job's files: its spec
    (``job.json``, the unit of work, when given) and, unless ``wrapper`` is false (a unit that a pilot or bundle
    job runs), its executable wrapper. The wrapper runs ``command``, by default the node-side entry point on
    the spec, under the ``executable`` setting, with the settings ``config`` (its JobConfig) of ``owner`` (named in errors
    as ``label``); a bad setting raises its SettingError before the wrapper is written."""
    if spec is not None:
        job_files.write_spec(spec)
    if not wrapper:
        return
    arguments = command if command is not None else [str(ENTRY_POINT), job_files.path_of("spec")]
    job_files.write_wrapper(render_job_wrapper(owner, label, config, job_files, [*executable_of(owner, config),
                                                                                  *arguments], checkpoint=checkpoint))


def job_wrapper(owner: Any, label: str, config: Any, job_files: Any, arguments: list[str]) -> str:
    """The executable wrapper of a job that runs the node-side entry point with ``arguments`` (under the
    ``executable`` setting), with the settings ``config`` (its JobConfig) of ``owner``: the job-script maker a front-end
    gives its run (``RunConfig.job_wrapper``) for the worker jobs the engine makes."""
    return render_job_wrapper(owner, label, config, job_files,
                              [*executable_of(owner, config), str(ENTRY_POINT), *arguments])


def render_job_wrapper(owner: Any, label: str, config: Any, job_files: Any, command: list[str],
                       checkpoint: bool = False) -> str:
    """The executable wrapper of a job that runs ``command`` (``executable`` is prepended by the caller), with
    the settings ``config`` (its JobConfig) of ``owner`` (named in errors); with ``checkpoint`` the batch system's warning
    (SIGUSR1, SIGUSR2) is passed on to the command, which saves its state and ends with exit code 75."""
    shell = config["shell"]  # looked up once for the whole wrapper
    _check_shell(owner, shell)
    configured = config["working_dir"]
    working_dir = base_folder.resolve(configured) if configured else base_folder.base_dir()
    env_script, env = env_script_of(owner, config), env_of(owner, config)
    container = None
    if wants_container(config):  # (containers is imported for a job that has one)
        from b2batch.jobscript import containers

        container = containers.container_of(owner, config, job_files, working_dir, env_script)
    values = (label, *job_files.wrapper_paths())
    if container is None:  # the common case: the job's own values go into the wrapper its settings make
        if env_script is None and not checkpoint and command[:2] == [sys.executable, str(ENTRY_POINT)]:
            # a wrapper the local system may stand in for (it forks the job: b2batch.systems.local_forks)
            with contextlib.suppress(AttributeError):  # (a stand-in for JobFiles may have no place for it)
                job_files.launch = Launch(label, str(working_dir), tuple(env), tuple(command[1:]))
        parts = _skeleton(shell, str(working_dir), env_script and str(env_script), tuple(env), checkpoint)
        words = [quote(value) for value in values]
        words.append(" ".join(quote(word) for word in command))
        return "".join(part if slot < 0 else words[slot] for part, slot in parts)
    command = container.wrap(command, shell, env_script, env, job_files.setup_failed)
    return _render(shell, values, env_script, env, working_dir, container, command, checkpoint)


def _check_shell(owner: Any, shell: Any) -> None:
    """Stop before submitting a job whose wrapper could not start: its ``shell`` is no program here."""
    if not _shell_found(str(shell)):
        raise SettingError(f"Task {owner}: the setting 'shell' is {str(shell)!r}, which is no program on this host's "
                           f"PATH, so no job's wrapper could start. Set shell to an installed shell, e.g. 'bash'.")


@functools.lru_cache(maxsize=8)
def _shell_found(shell: str) -> bool:
    import os
    import shutil

    # PATH and the standard folders: the node's PATH is not this one's (a steering process may run with a bare PATH)
    search = os.pathsep.join([os.environ.get("PATH", ""), "/usr/local/bin", "/usr/bin", "/bin"])
    return shutil.which(shell, path=search) is not None


def _render(shell: Any, values: tuple[Any, ...], env_script: Any, env: Any, working_dir: Any, container: Any,
            command: Any, checkpoint: bool) -> str:
    task_id, log_folder, stdout, stderr, exit_code_file, setup_failed_file = values
    return render("executable_wrapper.sh.j2", shell=shell, task_id=task_id, log_folder=log_folder, stdout=stdout,
                  stderr=stderr, exit_code_file=exit_code_file, setup_failed_file=setup_failed_file,
                  env_script=env_script, env=env, working_dir=working_dir, container=container, command=command,
                  checkpoint=checkpoint)


#: Stand-ins for a job's own values in a wrapper rendered once for every job with the same settings: shell-safe
#: words (quoting leaves them as they are) that no value holds (a random part per process).
_SLOT = f"b2batchslot{os.urandom(8).hex()}x"
_SLOT_WORD = re.compile(re.escape(_SLOT) + r"(\d+)")


@functools.lru_cache(maxsize=64)
def _skeleton(shell: Any, working_dir: str, env_script: str | None, env: tuple[tuple[str, str], ...],
              checkpoint: bool) -> tuple[tuple[str, int], ...]:
    """The wrapper of the jobs with these settings, as text parts and the numbers of the job's own values between
    them (-1: text): put together from the template's shapes rendered ahead (:mod:`b2batch.jobscript.skeletons`),
    or the template rendered once per distinct settings (not once per job) when they do not fit it."""
    ahead = skeletons.skeleton(str(shell), working_dir, env_script, env, checkpoint)
    if ahead is not None:
        return ahead
    slots = tuple(f"{_SLOT}{i}" for i in range(7))
    text = _render(shell, slots[:6], env_script, env, working_dir, None, [slots[6]], checkpoint)
    parts: list[tuple[str, int]] = []
    at = 0
    for found in _SLOT_WORD.finditer(text):
        parts.append((text[at:found.start()], -1))
        parts.append(("", int(found.group(1))))
        at = found.end()
    parts.append((text[at:], -1))
    return tuple(parts)
