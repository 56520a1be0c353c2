"""``--dry-run``, ``--show-output``, ``--remove`` and ``--remove-only`` as b2luigi 1.3 answers them (the setting
``b2luigi_cli``, on under the b2luigi profile): its texts, its choice of tasks and its exit statuses.

- ``--dry-run``: per task class (sorted) each task that is not complete, external ones too, as
  ``<tab>Would run <task>`` (``<tab>call: dry_run()`` before calling its ``dry_run()``), a blank line after
  each, then ``In total N`` or ``All tasks are finished!``; the script ends with status 0.
- ``--show-output``: per task class a panel with each output's path and ``✓``/``✗``.
- ``--remove CLASS``: the tasks of the class and every task that needs them, directly or not;
  ``--remove-only CLASS``: those of the class only. ``--keep CLASS`` spares a class. Without ``-y`` the
  classes are listed and the question ``Remove these outputs?`` asked. Then per class each task's
  ``remove_output()`` is called and the script ends with status 0: nothing runs after a removal.
"""

from __future__ import annotations

import collections
import os
from collections.abc import Iterable, Iterator
from typing import Any, NoReturn

import luigi.task

__all__ = ["dry_run", "remove", "show_outputs"]


def _console() -> Any:
    from rich.console import Console  # (rich only where a flag prints: jobs import task_iterator's module)

    return Console(highlight=False)


def _requirements(task: Any) -> list[Any]:
    return luigi.task.flatten(task.requires())


def task_iterator(tasks: Iterable[Any], only_non_complete: bool = False) -> Iterator[Any]:
    """Every task of the graphs of ``tasks`` once, each before what it requires, depth first; with
    ``only_non_complete`` complete tasks (and what only they require) are left out."""
    seen: set[str] = set()
    stack = list(reversed(list(tasks)))
    while stack:
        task = stack.pop()
        if task.task_id in seen:
            continue
        seen.add(task.task_id)
        if only_non_complete and task.complete():
            continue
        yield task
        stack.extend(reversed(_requirements(task)))


def dry_run(tasks: list[Any]) -> NoReturn:
    """Print what would run, as b2luigi's ``--dry-run`` does, and end the script with status 0."""
    from rich.text import Text

    console = _console()
    by_class: dict[str, list[Any]] = collections.defaultdict(list)
    for task in task_iterator(tasks, only_non_complete=True):
        by_class[type(task).__name__].append(task)
    for name in sorted(by_class):
        console.print(Text(name, style="bold"))
        for task in by_class[name]:
            console.print(Text(f"\tWould run {task}"))
            if hasattr(task, "dry_run"):
                console.print("\tcall: dry_run()")
                task.dry_run()
            console.print()
    total = sum(len(class_tasks) for class_tasks in by_class.values())
    console.print(f"In total {total}" if total else "All tasks are finished!")
    raise SystemExit(0)


def _outputs(task: Any) -> list[tuple[str, bool]]:
    return [(os.path.abspath(str(getattr(target, "path", target))), target.exists())
            for target in luigi.task.flatten(task.output())]


def show_outputs(tasks: list[Any]) -> None:
    """Per task class a panel of the outputs of its tasks, each path with ``✓`` (there) or ``✗``."""
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    console = _console()
    by_class: dict[str, list[Any]] = {}
    for task in task_iterator(tasks):
        by_class.setdefault(type(task).__name__, []).append(task)
    for name, class_tasks in by_class.items():
        table = Table(show_header=True, header_style="bold", show_lines=False, box=None)
        table.add_column("Location", overflow="fold")
        table.add_column("", justify="center", no_wrap=True)
        for task in class_tasks:
            for path, exists in _outputs(task):
                table.add_row(Text(path), Text("✓", style="green") if exists else Text("✗", style="red"))
        console.print(Panel(table, title=Text(name, style="bold"), border_style="cyan"))


def _chosen(tasks: list[Any], names: list[str], only: bool) -> tuple[dict[str, list[Any]], set[str]]:
    """The tasks to remove by class, and the names that matched a class of the graph."""
    by_class: dict[str, list[Any]] = collections.defaultdict(list)
    needed_by: dict[str, list[Any]] = collections.defaultdict(list)
    graph = list(task_iterator(tasks))
    for task in graph:
        by_class[type(task).__name__].append(task)
        for requirement in _requirements(task):
            needed_by[requirement.task_id].append(task)
    chosen: dict[str, dict[str, Any]] = collections.defaultdict(dict)
    matched = {name for name in names if by_class.get(name)}
    for name in names:
        for task in by_class.get(name, []):
            stack = [task]
            while stack:
                current = stack.pop()
                if current.task_id in chosen[type(current).__name__]:
                    continue
                chosen[type(current).__name__][current.task_id] = current
                if not only:
                    stack.extend(needed_by[current.task_id])
    return {name: list(found.values()) for name, found in chosen.items() if found}, matched


def remove(tasks: list[Any], names: list[str], only: bool, yes: bool, keep: list[str]) -> NoReturn:
    """Remove the outputs of the tasks of the classes ``names`` (and, unless ``only``, of every task that
    needs them), sparing the classes ``keep``; as b2luigi does, then end the script with status 0."""
    from rich.prompt import Confirm
    from rich.text import Text

    console = _console()
    chosen, matched = _chosen(tasks, names, only)
    if keep:
        for name in keep:
            if name in chosen:
                console.print(Text(f"Keeping {name} outputs.", style="yellow"))
                del chosen[name]
        console.print()
    if not chosen:
        console.print("Nothing to remove.")
        raise SystemExit(0)
    if not yes:
        unknown = sorted(set(names) - matched)
        if unknown:
            console.print(Text("The following tasks were not found in the graph and can't be removed:", style="yellow"))
            for name in unknown:
                console.print(Text(f"\t- {name}", style="bold"))
            console.print()
        console.print("The following task outputs will be removed:")
        for name in sorted(chosen):
            console.print(Text(f"\t- {name}", style="bold"))
        console.print()
        if not Confirm.ask("Remove these outputs?", console=console):
            console.print(Text("No tasks were removed.", style="yellow"))
            raise SystemExit(0)
    removed = 0
    for name in sorted(chosen):
        console.print(Text(name, style="bold"))
        for task in chosen[name]:
            console.print(Text(f"\tRemoving... {task}"))
            if hasattr(task, "remove_output"):
                console.print("\tcall: remove_output()")
                task.remove_output()
                removed += 1
            else:
                console.print(Text(f"\tSkipping {name}: not a b2luigi.Task, no remove_output().", style="yellow"))
            console.print()
    console.print(Text(f"Removed outputs for {removed} tasks." if removed else "No outputs were removed.",
                       style="green" if removed else "yellow"))
    raise SystemExit(0)
