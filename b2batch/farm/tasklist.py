"""Task lists: what the lines of a task-list file are, their ids, and how a line becomes a command.

A task is a line that is not blank and does not start with ``#``; ids count tasks from 0 (comments and
blank lines take no id), as PyTaskFarmer counts them. The work dir keeps a hash of the tasks so that a list
changed between two runs is found before an id points to another line (:mod:`b2batch.farm.workdir`).

A handler turns a task into the command a runner runs. The default, ``default``, runs each line as it is;
:class:`TemplateTaskList` puts each line (e.g. an input file) into a command template. Handlers are defined
in INI files (``[name]``, ``TaskList = module.Class`` and keyword arguments) in
``~/.b2batch/tasklists.d``, ``~/.pytaskfarmer/tasklists.d`` and, as PyTaskFarmer does, the working
directory. A handler class takes ``(path, workdir, **kwargs)`` and has ``tasks`` (the lines),
``len()`` and ``handler[id]`` (the command); PyTaskFarmer's handler classes fit.
"""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from b2batch.farm.definitions import Definition, FarmError, ini_files, read_definitions, user_folders


def read_tasks(path: str | Path) -> list[str]:
    """The tasks of a task-list file: its lines stripped, without blank ones and those starting with ``#``."""
    return read_numbered_tasks(path)[0]


def read_numbered_tasks(path: str | Path) -> tuple[list[str], list[int]]:
    """The tasks of a task-list file, and the number of the file's line (from 1) each comes from."""
    tasks: list[str] = []
    numbers: list[int] = []
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            for number, line in enumerate(f, 1):
                task = line.strip()
                if task and not line.startswith("#"):
                    tasks.append(task)
                    numbers.append(number)
        return tasks, numbers
    except FileNotFoundError:
        raise FarmError(f"The task list {path} does not exist. Give the path of a text file with one command "
                        f"per line (b2batch farm TASKLIST ...).") from None
    except IsADirectoryError:
        raise FarmError(f"The task list {path} is a directory. Give the path of a text file with one command "
                        f"per line.") from None
    except OSError as e:
        raise FarmError(f"Cannot read the task list {path}: {e}.") from None


def tasks_hash(tasks: Sequence[str], count: int | None = None) -> str:
    """SHA-256 of the first ``count`` tasks (all by default), one per line."""
    digest = hashlib.sha256()
    for line in tasks[:count]:
        digest.update(line.encode("utf-8", "surrogateescape"))
        digest.update(b"\n")
    return digest.hexdigest()


class ListTaskList:
    """The default handler: one command per line, run as it is."""

    def __init__(self, path: str | Path, workdir: str | Path, **kwargs: str) -> None:
        if kwargs:
            raise FarmError(f"The task-list handler {type(self).__name__} takes no options; got "
                            f"{', '.join(sorted(kwargs))}.")
        self.path = str(path)
        self.workdir = str(workdir)
        self.tasks, self.line_numbers = read_numbered_tasks(path)

    def __len__(self) -> int:
        return len(self.tasks)

    def __getitem__(self, task_id: int) -> str:
        return self.tasks[task_id]


class TemplateTaskList(ListTaskList):
    """Each line is a value (e.g. an input file) put into ``template``: ``{line}`` is the line shell-quoted,
    ``{raw}`` as it is, ``{id}`` the task id. E.g. ``template = root -b -q 'ana.C("{raw}")'`` or
    ``template = process --input {line} --output out_{id}.root``."""

    def __init__(self, path: str | Path, workdir: str | Path, template: str = "", **kwargs: str) -> None:
        super().__init__(path, workdir, **kwargs)
        if "{line}" not in template and "{raw}" not in template:
            raise FarmError(f"The task-list handler TemplateTaskList needs a 'template' containing {{line}} or "
                            f"{{raw}}, e.g. template = process --input {{line}}; got {template!r}.")
        self.template = template

    def __getitem__(self, task_id: int) -> str:
        line = self.tasks[task_id]
        try:
            return self.template.format(line=shlex.quote(line), raw=line, id=task_id)
        except (KeyError, IndexError, ValueError) as e:
            raise FarmError(f"The template {self.template!r} cannot be filled ({e!r}): use {{line}}, {{raw}}, "
                            f"{{id}}, and double braces for literal ones.") from e


BUILT_IN: dict[str, type] = {"default": ListTaskList, "template": TemplateTaskList}
#: PyTaskFarmer's class names, for its INI files when PyTaskFarmer itself is not installed.
ALIASES = {"taskfarmer.task.ListTaskList": "b2batch.farm.tasklist.ListTaskList"}


def handler_definitions(cwd: Path | None = None) -> dict[str, Definition]:
    """The task-list handlers defined in INI files (user folders strictly, the working directory leniently)."""
    found = read_definitions(ini_files(user_folders("tasklists.d")), "TaskList")
    found.update(read_definitions(ini_files([cwd or Path.cwd()]), "TaskList", strict=False))
    return found


def load_handler(name: str, path: str | Path, workdir: str | Path) -> Any:
    """The handler ``name`` for the task list ``path``."""
    definitions = handler_definitions()
    if name in definitions:
        definition = definitions[name]
        cls = definition.load_class(ALIASES)
        try:
            return cls(str(path), str(workdir), **definition.kwargs)
        except FarmError:
            raise
        except TypeError as e:
            raise FarmError(f"{definition.origin}: [{name}] cannot make a {definition.reference} from its "
                            f"keys {sorted(definition.kwargs)}: {e}.") from e
    if name in BUILT_IN:
        if name == "template":
            raise FarmError("The handler 'template' needs a template: define it in an INI file, e.g. "
                            "~/.b2batch/tasklists.d/mine.ini with [mine], TaskList = "
                            "b2batch.farm.tasklist.TemplateTaskList and template = process --input {line}.")
        return BUILT_IN[name](path, workdir)
    known = sorted({*BUILT_IN, *definitions} - {"template"})
    raise FarmError(f"Unknown task-list handler {name!r} (--tasklist). Known: {', '.join(known)}. Define it "
                    f"in an INI file in ~/.b2batch/tasklists.d/ (or ~/.pytaskfarmer/tasklists.d/, or the "
                    f"working directory): [{name}], then TaskList = module.Class and its options.")
