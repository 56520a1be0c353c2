"""``b2luigi.core.executable``: the executable wrapper b2luigi submits as a task's job.

:func:`create_executable_wrapper` writes ``executable_wrapper.sh`` into the task's file folder: go to the
working directory, set up the environment, then run the task's worker command (``python <script>
--batch-runner --task-id <id>``, which runs that one task, or ``b2luigi batch-runner ...``), inside the
``apptainer_image`` if one is set. Its lines are b2luigi 1.3's, in its order, with one difference: every value
taken from the settings is a quoted shell word (b2luigi writes the working directory and the environment script
as they are), so that no setting can add a command to the job.

The helpers are looked up as names of this module (``get_setting``, ``get_task_file_dir``, ...), so that code
which replaces them here (b2luigi's own tests patch ``b2luigi.core.executable.get_setting``) takes effect.
b2batch's own jobs do not use this wrapper (``b2luigi.batch.helpers.wrapper_for`` writes theirs).
"""

from __future__ import annotations

import os
import re
import shlex
import stat
from typing import Any

from b2luigi.core.settings import get_setting
from b2luigi.core.utils import (create_apptainer_command, create_cmd_from_task, get_filename,
                                               get_task_file_dir)

__all__ = ["create_executable_wrapper"]

#: The name of the file, in the task's file folder.
WRAPPER_NAME = "executable_wrapper.sh"

#: What may follow ``#!/bin/`` (the ``shell`` setting): a program's name or a path below /bin.
_SHELL = re.compile(r"[A-Za-z0-9_.+\-/]+\Z")
#: An environment variable's name, as ``export`` takes it.
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_NOT_GIVEN: Any = object()


def _single_quoted(value: Any) -> str:
    """``value`` as one shell word in single quotes (b2luigi's form of the ``env`` values), each ``'`` in it
    closed, escaped and reopened."""
    return "'" + str(value).replace("'", "'\\''") + "'"


def _echo(text: str) -> str:
    return f"echo {shlex.quote(text)}"


def _environment_lines(task: Any, in_image: bool) -> list[str]:
    """Source ``env_script`` (not with an image: the container's command sources it), then ``export`` each of
    the ``env`` setting; a ``ValueError`` for a name that is no variable name."""
    lines = []
    env_script = get_setting("env_script", task=task, default="")
    if env_script and not in_image:
        lines += [_echo("Setting up the environment"), f"source {shlex.quote(str(env_script))}"]
    for name, value in get_setting("env", task=task, default={}).items():
        if not _VARIABLE.match(str(name)):
            raise ValueError(f"{name!r} in the setting env is not an environment variable's name (letters, digits "
                             f"and '_', not starting with a digit)")
        lines.append(f"export {name}={_single_quoted(value)}")
    return lines


def _wrapper_lines(task: Any) -> list[str]:
    shell = str(get_setting("shell", task=task, default="bash"))
    if not _SHELL.match(shell):
        raise ValueError(f"The setting shell must name a program under /bin (e.g. 'bash'), not {shell!r}")
    image = get_setting("apptainer_image", task=task, default="")
    working_dir = get_setting("working_dir", task=task, default=_NOT_GIVEN)
    if working_dir is _NOT_GIVEN:  # the folder of the task file, as b2luigi's default
        working_dir = os.path.abspath(os.path.dirname(get_filename()))
    lines = [f"#!/bin/{shell}", "set -e", f"cd {shlex.quote(str(working_dir))}",
             "echo 'Working in the folder:'; pwd"]
    lines += _environment_lines(task, in_image=bool(image))
    lines.append("echo 'Current environment:'; env")
    command = " ".join(create_cmd_from_task(task))  # its words are shell words already
    if image:
        lines += [_echo(f"Will now execute the program with the image {image}"),
                  shlex.join(create_apptainer_command(command, task=task))]
    else:
        lines += [_echo("Will now execute the program"), f"exec {command}"]
    return lines


def create_executable_wrapper(task: Any) -> str:
    """Write the task's ``executable_wrapper.sh`` (executable) into ``get_task_file_dir(task)`` and return its
    path. Running it runs the task's worker command in the working directory (the setting ``working_dir``,
    default: the task file's folder) after ``env_script`` and the ``env`` setting, or, with
    ``apptainer_image``, the command of ``create_apptainer_command``. A ``ValueError`` when ``shell`` or a
    name in ``env`` could not be written safely."""
    content = "\n".join(_wrapper_lines(task))
    folder = get_task_file_dir(task)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, WRAPPER_NAME)
    temporary = f"{path}.{os.getpid()}.tmp"  # a job that runs the old wrapper keeps reading the old file
    with open(temporary, "w") as f:
        f.write(content)
    os.chmod(temporary, os.stat(temporary).st_mode | stat.S_IEXEC)
    os.replace(temporary, path)
    return path
