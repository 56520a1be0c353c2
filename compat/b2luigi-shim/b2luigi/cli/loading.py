"""The user's task file (``tasks.py`` or ``--task-file``) and the task classes it brings: those in its
namespace (the *manifest*, by the names they have there) and the other task classes defined in files below
its folder (the *project*), with b2luigi's rules for naming them on the command line (bare names, or
``module.Class`` for project classes that share a name)."""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from b2luigi.cli.errors import CliUserError, suggest
from b2luigi.core.utils import SYNTHETIC_TASK_MODULE
from b2batch.luigi_frontend.task_on_node import import_file_as
from b2batch import ExternalTask, Task, WrapperTask

__all__ = ["TaskIndex", "build_task_index_from", "import_from_file", "is_from_task_classes", "load_task_class_from",
           "task_generator"]

#: What counts as a b2luigi task class (b2luigi's ExternalTask and WrapperTask derive from its Task).
TASK_BASES = (Task, ExternalTask, WrapperTask)
#: Packages whose classes are never the user's tasks.
FRAMEWORK_PACKAGES = ("b2luigi", "luigi", "b2batch")


def import_from_file(filename: str, module_name: str) -> Any:
    """Execute ``filename`` (relative to the current directory) as the module ``module_name``, registered in
    ``sys.modules`` (luigi finds batched tasks there) and with its folder on ``sys.path``."""
    path = os.path.join(os.getcwd(), filename)
    if not os.path.exists(path):
        raise CliUserError(f"'{filename}' not found in the current directory. Run 'b2luigi init' to create a "
                           f"starter project.")
    return import_file_as(module_name, path, f"Could not load spec for {filename}")


def task_generator(task_file: str = "tasks.py") -> Iterator[tuple[str, Any]]:
    """The names and values of the task file's namespace (the file is imported as ``TaskClasses``)."""
    module = import_from_file(task_file, SYNTHETIC_TASK_MODULE)
    yield from inspect.getmembers(module)


def _framework(cls: type) -> bool:
    return cls.__module__.partition(".")[0] in FRAMEWORK_PACKAGES


def is_from_task_classes(obj: Any) -> bool:
    """Whether ``obj`` is a user's task class (not one of b2luigi's, b2batch's or luigi's own)."""
    return inspect.isclass(obj) and issubclass(obj, TASK_BASES) and not _framework(obj)


def _all_task_classes() -> Iterator[type]:
    stack: list[type] = list(TASK_BASES)
    seen: set[int] = set()
    while stack:
        for sub in stack.pop().__subclasses__():
            if id(sub) not in seen:
                seen.add(id(sub))
                stack.append(sub)
                yield sub


def _project_classes(task_file: str) -> list[type]:
    """The loaded task classes whose source file is below the task file's folder (symbolic links resolved),
    and which are still the class their module holds under their name (not left over from an earlier import)."""
    root = os.path.realpath(os.path.dirname(os.path.abspath(task_file)))
    found = []
    for cls in _all_task_classes():
        if _framework(cls):
            continue
        try:
            source = os.path.realpath(inspect.getfile(cls))
            if os.path.commonpath([root, source]) != root:
                continue
        except (TypeError, OSError, ValueError):
            continue
        module = sys.modules.get(cls.__module__)
        if module is None or getattr(module, cls.__name__, None) is not cls:
            continue
        found.append(cls)
    return found


@dataclass(frozen=True)
class TaskIndex:
    """The task classes a command can name: ``manifest`` (name in the task file: class) and ``project``
    (bare class name: the classes of that name elsewhere in the project, by module)."""

    manifest: dict[str, type]
    project: dict[str, tuple[type, ...]]
    task_file: str

    def all_classes(self) -> list[type]:
        """Every class once, sorted by name and module."""
        classes = {id(cls): cls for cls in self.manifest.values()}
        for candidates in self.project.values():
            for cls in candidates:
                classes.setdefault(id(cls), cls)
        return sorted(classes.values(), key=lambda cls: (cls.__name__, cls.__module__))

    def qualified_name(self, cls: type) -> str:
        """The name shown for ``cls``: bare for classes of the task file, ``module.Class`` otherwise."""
        return cls.__name__ if cls.__module__ == SYNTHETIC_TASK_MODULE else f"{cls.__module__}.{cls.__name__}"

    def display_module(self, cls: type) -> str:
        """The module shown by ``b2luigi tasks``: the task file's name for its own classes."""
        return os.path.basename(self.task_file) if cls.__module__ == SYNTHETIC_TASK_MODULE else cls.__module__

    def completion_names(self) -> list[str]:
        """The names shell completion offers: bare where unique, qualified where a name is shared."""
        names = set(self.manifest)
        for name, candidates in self.project.items():
            if len(candidates) == 1 and name not in self.manifest:
                names.add(name)
            else:
                names.update(self.qualified_name(cls) for cls in candidates)
        return sorted(names)

    def resolve(self, name: str, hint_cmd: str = "b2luigi tasks") -> type:
        """The one class ``name`` (bare or ``module.Class``) means; ``CliUserError`` when none or several."""
        if "." in name:
            for cls in self.all_classes():
                if cls.__module__ != SYNTHETIC_TASK_MODULE and f"{cls.__module__}.{cls.__name__}" == name:
                    return cls
        elif name in self.manifest:
            return self.manifest[name]
        else:
            candidates = self.project.get(name, ())
            if len(candidates) == 1:
                return candidates[0]
            if candidates:
                listed = ", ".join(sorted(self.qualified_name(cls) for cls in candidates))
                raise CliUserError(f"Ambiguous task name '{name}'. Candidates: {listed}. Use the qualified name.")
        message = f"Unknown task '{name}'."
        close = suggest(name, self.completion_names())
        if close:
            message += f" Did you mean '{close}'?"
        raise CliUserError(f"{message} Use '{hint_cmd}' to see available tasks.")

    def resolve_many(self, names: list[str], hint_cmd: str = "b2luigi tasks") -> list[type]:
        """Each name resolved, each class once, in the order given."""
        classes: dict[int, type] = {}
        for name in names:
            cls = self.resolve(name, hint_cmd=hint_cmd)
            classes.setdefault(id(cls), cls)
        return list(classes.values())


def build_task_index_from(task_file: str) -> TaskIndex:
    """Import the task file and index its task classes and the project's."""
    manifest = {name: obj for name, obj in task_generator(task_file) if is_from_task_classes(obj)}
    in_manifest = {id(cls) for cls in manifest.values()}
    grouped: dict[str, list[type]] = {}
    for cls in _project_classes(task_file):
        if id(cls) not in in_manifest:
            grouped.setdefault(cls.__name__, []).append(cls)
    project = {name: tuple(sorted(found, key=lambda cls: cls.__module__)) for name, found in grouped.items()}
    return TaskIndex(manifest=manifest, project=project, task_file=task_file)


def load_task_class_from(index: TaskIndex, class_name: str) -> type:
    """The class ``class_name`` names in ``index``; a ``module.Class`` it does not know is imported."""
    try:
        return index.resolve(class_name, hint_cmd="b2luigi tasks")
    except CliUserError:
        if "." not in class_name:
            raise
    module_name, _, bare = class_name.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise CliUserError(f"Unknown task '{class_name}': module '{module_name}' could not be imported "
                           f"({e}).") from e
    obj = getattr(module, bare, None)
    if obj is None:
        raise CliUserError(f"Unknown task '{class_name}': '{bare}' not found in module '{module_name}'.")
    if not is_from_task_classes(obj):
        raise CliUserError(f"'{class_name}' is not a b2luigi task class.")
    return obj
