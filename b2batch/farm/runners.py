"""Runners: how a farmer runs one line. A runner turns a line into the process to start (:class:`Launch`);
the farmer starts it in a process group of its own, with its output in the line's log and the line's id in
``PROC_NUMBER``.

Built in:

- ``default``: the line run by ``/bin/sh -c`` (pipes, redirections, ``&&`` and variables work);
- ``split``: the line split on white space and run without a shell, as PyTaskFarmer's default runner does;
- :class:`ContainerRunner` (and :class:`ApptainerRunner`, :class:`SingularityRunner`, :class:`PodmanRunner`,
  :class:`ShifterRunner`): the line run by ``/bin/bash -c "<setup> && <line>"`` inside a container image,
  with volumes and, optionally, a fresh temporary directory per line as its working directory.

Users define more in INI files in ``~/.b2batch/runners.d/*.ini`` or PyTaskFarmer's
``~/.pytaskfarmer/runners.d/*.ini``: a section name, ``Runner = module.Class`` and keyword arguments. A class
may be a :class:`Runner` subclass, or PyTaskFarmer-style, with ``run(taskid, command, logfh)`` returning the
exit code (and ``terminate()``): the farmer then calls it in a forked child process.
"""

from __future__ import annotations

import re
import shlex
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from b2batch.farm.definitions import FarmError, as_bool, ini_files, read_definitions, user_folders
from b2batch.jobscript.container_command import ContainerCommand


@dataclass
class Launch:
    """The process that runs one line."""

    argv: list[str]
    #: Variables added to the farmer's environment (beside PROC_NUMBER).
    env: dict[str, str] | None = None
    #: Called once the line's process ended (e.g. to remove its temporary directory).
    cleanup: Callable[[], None] | None = None
    #: The program's path when the runner found it already (the farmer then starts it without searching PATH
    #: again); else ``argv[0]``, searched on PATH.
    executable: str | None = None


class Runner:
    """Turns a line into the process that runs it."""

    def launch(self, task_id: int, command: str) -> Launch:
        raise NotImplementedError


#: A line that is one simple command: words of these characters only (no quotes, variables, globs,
#: redirections, pipes, separators, escapes or comments).
_SIMPLE = re.compile(r"[A-Za-z0-9_./,:+@%-]+(?: +[A-Za-z0-9_./,:+@%=-]+)*\Z")
#: Commands that differ from the shell's builtin of the same name, or are only builtins.
_SHELL_ONLY = frozenset(["alias", "bg", "break", "cd", "command", "continue", "echo", "eval", "exec", "exit", "export", "fc", "fg", "getopts", "hash", "jobs", "kill", "printf", "pwd", "read", "readonly", "return", "set", "shift", "test", "times", "trap", "type", "ulimit", "umask", "unalias", "unset", "wait"])


class ShellRunner(Runner):
    """The line run by a shell (``/bin/sh -c LINE``).

    A line that is one simple command (plain words, no shell syntax at all) whose program is found on PATH is
    executed directly, as ``bash -c`` does for such a line: the result is the same, one process start less.
    """

    def __init__(self, shell: str = "/bin/sh", direct: Any = True) -> None:
        self.shell = shell
        self.direct = as_bool(direct)
        self._found: dict[str, str | None] = {}

    def launch(self, task_id: int, command: str) -> Launch:
        if self.direct and _SIMPLE.match(command):
            words = command.split()
            program = words[0]
            if program not in _SHELL_ONLY and "=" not in program:
                if program not in self._found:
                    self._found[program] = shutil.which(program)
                found = self._found[program]
                if found:  # found as the shell would find it: run as the shell would run it
                    return Launch(words, executable=found)
        return Launch([self.shell, "-c", command])


class SplitRunner(Runner):
    """The line split on white space, run without a shell (PyTaskFarmer's ``BasicRunner``)."""

    def launch(self, task_id: int, command: str) -> Launch:
        argv = command.split()
        if not argv:
            raise FarmError(f"Task {task_id}: an empty command")
        return Launch(argv)


ENGINES = ("apptainer", "singularity", "podman", "shifter")


class ContainerRunner(Runner):
    """The line run in a container: ``/bin/bash -c "<setup> && <line>"`` in ``image`` by ``engine``.

    Options (INI values are strings): ``engine`` (apptainer, singularity, podman, shifter), ``image``,
    ``setup`` (commands run first, e.g. ``source /opt/env.sh``), ``volumes`` (space-separated
    ``host[:container[:options]]``), ``modules`` (Shifter modules, space-separated), ``tempdir`` (True: each
    line starts in a fresh temporary directory, removed afterwards), ``options`` (more arguments to the
    engine, shell syntax), ``shell`` (default ``/bin/bash``).
    """

    engine = "apptainer"

    def __init__(self, image: str = "", engine: str | None = None, setup: str = "", volumes: str = "",
                 modules: str = "", tempdir: Any = False, options: str = "", shell: str = "/bin/bash") -> None:
        self.engine = (engine or type(self).engine).strip().lower()
        if self.engine not in ENGINES:
            raise FarmError(f"Unknown container engine {engine!r}. Known: {', '.join(ENGINES)}.")
        if not image.strip():
            raise FarmError(f"The {self.engine} runner needs an image (image = ...).")
        if modules.strip() and self.engine != "shifter":
            raise FarmError(f"'modules' is a Shifter option; the {self.engine} runner has none (use options).")
        self.image = image.strip()
        self.setup = setup.strip()
        self.volumes = volumes.split()
        self.modules = modules.split()
        self.tempdir = as_bool(tempdir)
        try:
            self.options = shlex.split(options)
        except ValueError as e:
            raise FarmError(f"The {self.engine} runner's options {options!r} are not valid shell words: {e}.") from e
        self.shell = shell

    def script(self, command: str) -> str:
        return f"{self.setup} && {command}" if self.setup else command

    def command_line(self, command: str, temporary: str | None = None) -> list[str]:
        """The engine's command line that runs ``command`` (in ``temporary`` as working directory), spelt by
        :mod:`b2batch.jobscript.container_command`: the volumes as written, PROC_NUMBER passed into podman."""
        container = ContainerCommand(engine=self.engine, image=self.image, binds=self.volumes,
                                     workdir=temporary or "", bind_workdir=True,
                                     env_names=["PROC_NUMBER"] if self.engine == "podman" else [],
                                     options=self.options, modules=self.modules)
        return container.argv([self.shell, "-c", self.script(command)])

    def launch(self, task_id: int, command: str) -> Launch:
        temporary = tempfile.mkdtemp(prefix=f"farm-task{task_id}-") if self.tempdir else None
        cleanup = (lambda: shutil.rmtree(temporary, ignore_errors=True)) if temporary else None
        env = {"BASH_ENV": ""} if self.engine == "shifter" else None  # as PyTaskFarmer: no startup file
        return Launch(self.command_line(command, temporary), env=env, cleanup=cleanup)


class ApptainerRunner(ContainerRunner):
    engine = "apptainer"


class SingularityRunner(ContainerRunner):
    engine = "singularity"


class PodmanRunner(ContainerRunner):
    engine = "podman"


class ShifterRunner(ContainerRunner):
    """PyTaskFarmer's ShifterRunner options: ``image``, ``setup``, ``volumes``, ``modules``, ``tempdir``."""

    engine = "shifter"


BUILT_IN: dict[str, Callable[[], Any]] = {"default": ShellRunner, "split": SplitRunner}
#: PyTaskFarmer's runner classes, served by b2batch's own (the same command lines).
ALIASES = {
    "taskfarmer.runners.BasicRunner": "b2batch.farm.runners.SplitRunner",
    "taskfarmer.runners.ShifterRunner": "b2batch.farm.runners.ShifterRunner",
}


def load_runner(name: str) -> Any:
    """The runner ``name``: built in, or defined in an INI file of the users' runner folders."""
    definitions = read_definitions(ini_files(user_folders("runners.d")), "Runner")
    if name in definitions:
        definition = definitions[name]
        cls = definition.load_class(ALIASES)
        try:
            runner = cls(**definition.kwargs)
        except FarmError as e:
            raise FarmError(f"{definition.origin}: [{name}]: {e}") from e
        except TypeError as e:
            raise FarmError(f"{definition.origin}: [{name}] cannot make a {definition.reference} from its keys "
                            f"{sorted(definition.kwargs)}: {e}. Fix the keys of that section.") from e
        if not isinstance(runner, Runner) and not callable(getattr(runner, "run", None)):
            raise FarmError(f"{definition.origin}: [{name}] names {definition.reference}, which is no runner: "
                            f"subclass b2batch.farm.runners.Runner, or give it run(taskid, command, logfh).")
        return runner
    if name in BUILT_IN:
        return BUILT_IN[name]()
    known = sorted({*BUILT_IN, *definitions})
    raise FarmError(f"Unknown runner {name!r} (--runner). Known: {', '.join(known)}. Define it in an INI file in "
                    f"~/.b2batch/runners.d/ (or ~/.pytaskfarmer/runners.d/): [{name}], then Runner = module.Class "
                    f"(e.g. b2batch.farm.runners.ContainerRunner) and its options.")
