"""Looking at a workflow's outputs without running it: the graph walked once (:func:`walk`), ``--dry-run``,
``--show-output``, and removing outputs (``--remove``, ``b2batch remove``)."""

from __future__ import annotations

import collections
from collections.abc import Iterator
from typing import Any

import luigi
import luigi.task

from b2batch.command.console import confirm
from b2batch.luigi_frontend.task_outputs import outputs_counted


def walk(tasks: list[Any], descend_into_complete: bool = True) -> Iterator[tuple[Any, bool]]:
    """Every task of the graph once, with whether it is complete; requirements after the tasks needing them.

    With ``descend_into_complete=False`` the requirements of complete tasks are skipped, as luigi would.
    """
    seen: set[str] = set()
    stack = list(reversed(tasks))
    while stack:
        task = stack.pop()
        if task.task_id in seen:
            continue
        seen.add(task.task_id)
        complete = task.complete() and outputs_counted(task)  # partial outputs of a failed job do not count
        yield task, complete
        if descend_into_complete or not complete:
            stack.extend(reversed(luigi.task.flatten(task.requires())))


def _describe(task: Any) -> str:
    params = ", ".join(f"{k}={v}" for k, v in task.to_str_params(only_significant=True).items())
    return f"{task.task_family}({params})"


def print_dry_run(tasks: list[Any]) -> int:
    """Print, as b2luigi does, the tasks that would run, grouped by class (``Would run <task>``, and
    ``call: dry_run()`` before calling a task's ``dry_run()`` method), then ``In total N`` or ``All tasks are
    finished!``; how many would run. External tasks whose outputs are missing are named, not counted."""
    from rich.text import Text

    from b2batch.luigi_frontend.terminal import per_family, terminal

    console = terminal()
    would_run: dict[str, list[Any]] = collections.defaultdict(list)
    missing = []
    for task, complete in walk(tasks, descend_into_complete=False):
        if not complete:
            (would_run[task.task_family] if getattr(type(task), "run", None) else missing).append(task)
    per_family(console, would_run, "Would run", "dry_run")
    for task in missing:
        console.print(Text(f"Missing input {task}: an external task whose output does not exist", style="red"))
    total = sum(len(family_tasks) for family_tasks in would_run.values())
    console.print(f"In total {total}" if total else "All tasks are finished!")
    return total


def print_outputs(tasks: list[Any]) -> None:
    """Print every task of the graph with its output files and whether each exists."""
    for task, _complete in walk(tasks):
        print(_describe(task))
        for target in luigi.task.flatten(task.output()):
            path = getattr(target, "path", target)
            mark = "exists " if target.exists() else "missing"
            print(f"    [{mark}] {path}")


def task_names(value: Any) -> list[str]:
    """Task class names given to ``remove``/``remove_only``/``keep_tasks``: a name, names, or a flag."""
    if value in (None, True, False):
        return []
    return [value] if isinstance(value, str) else [str(name) for name in value]


def tasks_to_remove(tasks: list[Any], names: list[str], keep: list[str]) -> list[Any]:
    """The tasks whose outputs ``--remove`` removes: the root ``tasks``, or with ``names`` every task of those
    classes in their graph; without the tasks of the classes in ``keep``. A name not in the graph stops the
    run with an error that lists the classes there are."""
    graph = [task for task, _complete in walk(tasks)] if names or keep else tasks
    families = {task.task_family for task in graph}
    unknown = sorted((set(names) | set(keep)) - families)
    if unknown:
        raise SystemExit(f"ERROR: --remove/--keep name task classes that are not in the workflow's graph: "
                         f"{', '.join(unknown)}. The graph has: {', '.join(sorted(families))}.")
    chosen = [task for task in graph if task.task_family in names] if names else list(tasks)
    return [task for task in chosen if task.task_family not in keep]


def remove_outputs(tasks: list[Any], ask: bool) -> int:
    """Remove the outputs of ``tasks`` (not of their requirements), saying what it does as b2luigi does; how
    many tasks had outputs removed."""
    from rich.text import Text

    from b2batch.luigi_frontend.terminal import per_family, terminal

    console = terminal()
    by_family: dict[str, list[Any]] = collections.defaultdict(list)
    for task in {t.task_id: t for t in tasks}.values():
        if any(target.exists() for target in luigi.task.flatten(task.output())):
            by_family[task.task_family].append(task)
    if not by_family:
        console.print("Nothing to remove.")
        return 0
    if ask:
        console.print("The following task outputs will be removed:")
        for family in sorted(by_family):
            console.print(Text(f"\t- {family}", style="bold"))
            for task in by_family[family]:
                for target in luigi.task.flatten(task.output()):
                    if target.exists():
                        console.print(Text(f"\t    {getattr(target, 'path', target)}"))
        console.print()
        if not confirm("Remove these outputs?"):
            console.print("No tasks were removed (pass --yes to remove without asking).", style="yellow")
            return 0

    def remove_targets(task: Any) -> None:
        for target in luigi.task.flatten(task.output()):
            if target.exists():
                target.remove()

    per_family(console, by_family, "Removing...", "remove_output", otherwise=remove_targets)
    removed = sum(len(family_tasks) for family_tasks in by_family.values())
    console.print(f"Removed outputs for {removed} tasks.", style="green")
    return removed
