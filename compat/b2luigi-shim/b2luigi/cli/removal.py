"""What ``b2luigi remove`` does, in b2luigi 1.3's words: the outputs of the tasks of the named classes
(no cascade to the tasks that need them), or with ``--with-requirements`` of those tasks and everything they
require; ``--keep`` spares classes; unless ``-y`` the classes are listed and ``Remove these outputs?`` is
asked; each task's ``remove_output()`` is called; the command ends with status 0. (``python tasks.py
--remove``, the cascade, is b2batch's ``luigi_frontend.b2luigi_cli.remove``: ``legacy_remove_outputs``.)"""

from __future__ import annotations

import collections
from typing import Any, NoReturn

import luigi.task
from rich.prompt import Confirm

from b2luigi.cli import output
from b2luigi.core.utils import task_iterator
from b2batch.luigi_frontend import b2luigi_cli

__all__ = ["REMOVE_OUTPUT_ACTION", "legacy_remove_outputs", "remove_outputs", "remove_requirement_outputs"]

#: The methods ``remove`` calls and the word for what they remove.
REMOVE_OUTPUT_ACTION: tuple[tuple[str, ...], str] = (("remove_output",), "outputs")


def _console() -> Any:
    return output.console


def _call_remove_methods(task: Any, methods: tuple[str, ...]) -> bool:
    """Call each method the task has (saying so); whether any was called."""
    console = _console()
    called = False
    for method in methods:
        if not hasattr(task, method):
            console.print(f"\t[yellow]Skipping {type(task).__name__}: not a b2luigi.Task, no {method}().[/yellow]")
            continue
        console.print(f"\tcall: {method}()")
        getattr(task, method)()
        called = True
    return called


def _ask(names: list[str], noun: str) -> bool:
    console = _console()
    console.print(f"The following task {noun} will be removed:")
    for name in names:
        console.print(f"\t- [bold]{name}[/bold]")
    console.print()
    return Confirm.ask(f"Remove these {noun}?")


def _finish(removed: int, noun: str) -> NoReturn:
    if removed:
        _console().print(f"[green]Removed {noun} for {removed} tasks.[/green]")
    else:
        _console().print(f"[yellow]No {noun} were removed.[/yellow]")
    raise SystemExit(0)


def _confirm_and_remove(chosen: dict[str, list[Any]], target_tasks: list[str], matched: set[str],
                        auto_confirm: bool = False, keep_tasks: list[str] | None = None,
                        methods: tuple[str, ...] = REMOVE_OUTPUT_ACTION[0],
                        noun: str = REMOVE_OUTPUT_ACTION[1]) -> NoReturn:
    """Spare ``keep_tasks``, ask (naming the targets not in the graph), remove class by class, end."""
    console = _console()
    if keep_tasks:
        for name in set(keep_tasks):
            if name in chosen:
                console.print(f"[yellow]Keeping {name} {noun}.[/yellow]")
                del chosen[name]
        console.print()
    if not chosen:
        console.print("Nothing to remove.")
        raise SystemExit(0)
    if not auto_confirm:
        missing = sorted(set(target_tasks) - matched)
        if missing:
            console.print("[yellow]The following tasks were not found in the graph and can't be removed:[/yellow]")
            for name in missing:
                console.print(f"\t- [bold]{name}[/bold]")
            console.print()
        if not _ask(sorted(chosen), noun):
            console.print("[yellow]No tasks were removed.[/yellow]")
            raise SystemExit(0)
    removed = 0
    for name in sorted(chosen):
        console.print(f"[bold]{name}[/bold]")
        for task in chosen[name]:
            console.print(f"\t[green]Removing...[/green] {task}")
            removed += _call_remove_methods(task, methods)
            console.print()
    _finish(removed, noun)


def remove_outputs(task_list: list[Any], target_tasks: list[str], auto_confirm: bool = False,
                   keep_tasks: list[str] | None = None, methods: tuple[str, ...] = REMOVE_OUTPUT_ACTION[0],
                   noun: str = REMOVE_OUTPUT_ACTION[1]) -> NoReturn:
    """Remove the outputs of the tasks of the classes ``target_tasks`` (by name) in the graphs of
    ``task_list``; nothing else."""
    by_class: dict[str, dict[str, Any]] = collections.defaultdict(dict)
    stack = list(task_list)
    seen: set[str] = set()
    while stack:
        task = stack.pop()
        if task.task_id in seen:
            continue
        seen.add(task.task_id)
        by_class[type(task).__name__][task.task_id] = task
        try:
            stack.extend(luigi.task.flatten(task.requires()))
        except Exception as e:
            _console().print(f"[red]Failed to get requires() for {task}: {e}[/red]")
    chosen = {name: list(by_class[name].values()) for name in target_tasks if by_class.get(name)}
    _confirm_and_remove(chosen, target_tasks, set(chosen), auto_confirm, keep_tasks, methods=methods, noun=noun)


def remove_requirement_outputs(task_list: list[Any], auto_confirm: bool = False,
                               keep_tasks: list[str] | None = None,
                               methods: tuple[str, ...] = REMOVE_OUTPUT_ACTION[0],
                               noun: str = REMOVE_OUTPUT_ACTION[1]) -> NoReturn:
    """Remove the outputs of these tasks and of every task they require, directly or not."""
    console = _console()
    tasks: dict[str, Any] = {}
    for root in task_list:
        for task in task_iterator(root):
            tasks.setdefault(task.task_id, task)
    flat = list(tasks.values())
    if keep_tasks:
        kept = sorted({type(t).__name__ for t in flat} & set(keep_tasks))
        for name in kept:
            console.print(f"[yellow]Keeping {name} {noun}.[/yellow]")
        if kept:
            console.print()
        flat = [t for t in flat if type(t).__name__ not in set(keep_tasks)]
    if not flat:
        console.print("Nothing to remove.")
        raise SystemExit(0)
    if not auto_confirm and not _ask(sorted({type(t).__name__ for t in flat}), noun):
        console.print("[yellow]No tasks were removed.[/yellow]")
        raise SystemExit(0)
    removed = 0
    for task in flat:
        console.print(f"[bold]{type(task).__name__}[/bold]")
        console.print(f"\t[green]Removing...[/green] {task}")
        removed += _call_remove_methods(task, methods)
        console.print()
    _finish(removed, noun)


def legacy_remove_outputs(task_list: list[Any], target_tasks: list[str], only: bool = False,
                          auto_confirm: bool = False, keep_tasks: list[str] | None = None) -> NoReturn:
    """``python tasks.py --remove``/``--remove-only``: b2batch's removal of the process() flags (with
    ``only`` false, the tasks that need the named ones go too)."""
    b2luigi_cli.remove(task_list, list(target_tasks), only, yes=auto_confirm, keep=list(keep_tasks or []))
