"""The ``show``, ``tasks``, ``graph``, ``remove`` and ``cleanup`` commands of the ``b2batch`` console script.

Each loads a workflow script without running it: the script runs as ``__main__`` in its own folder, with
the arguments given after it, until it calls :func:`b2batch.process`; that call hands over the script's
root tasks and stops the script. Nothing of the workflow runs.
"""

from __future__ import annotations

import argparse
import builtins
import contextlib
import shutil
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import luigi
import luigi.task
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from b2batch.command.console import confirm, in_workflow_folder
from b2batch.luigi_frontend import graph_outputs, layout, workflow
from b2batch.luigi_frontend.task_outputs import outputs_counted
from b2batch.luigi_frontend.terminal import terminal
from b2batch.remote.existence import remote_checks

COMMANDS = {
    "show": "Show every task of a workflow with its output files (present or missing) as a dependency tree.",
    "tasks": "List the task classes of a workflow script with their parameters.",
    "graph": "Draw a workflow's dependency graph as a tree in the terminal, or in Graphviz DOT (--dot).",
    "remove": "Remove the outputs of a workflow's root tasks, or of the tasks of the classes named by -t.",
    "cleanup": "Remove the log files and job files of the workflow's tasks that are complete.",
}


@dataclass
class Workflow:
    """A loaded workflow script: its namespace and the root tasks it passes to process()."""

    script: Path
    namespace: dict[str, Any]
    tasks: list[Any]


class _Handover(Exception):
    def __init__(self, tasks: list[Any]) -> None:
        super().__init__("process() called")
        self.tasks = tasks


def _hand_over(task_like: Any, *args: Any, **kwargs: Any) -> None:
    raise _Handover(list(task_like) if isinstance(task_like, (list, tuple, set)) else [task_like])


@contextlib.contextmanager
def _process_hands_over() -> Iterator[None]:
    """``b2batch.process`` (under all its names) hands the tasks over instead of running them."""
    import b2batch

    owners = [m for m in (b2batch, workflow, sys.modules.get("b2luigi")) if m is not None]
    saved = [(m, m.__dict__.get("process")) for m in owners]
    for module in owners:
        module.process = _hand_over  # type: ignore[attr-defined]
    try:
        yield
    finally:
        for module, original in saved:
            if original is None:
                del module.process
            else:
                module.process = original  # type: ignore[attr-defined]


@contextlib.contextmanager
def loaded(script: str, args: list[str]) -> Iterator[Workflow]:
    """The workflow of ``script`` (run with ``args``), valid while the context lasts: meanwhile the working
    directory and the base folder of relative paths are the script's folder, as in a run of the script."""
    path = Path(script).resolve()
    if not path.is_file():
        raise SystemExit(f"b2batch: no workflow script {script}")
    module = types.ModuleType("__main__")
    module.__dict__.update(__file__=str(path), __builtins__=builtins)
    saved_main, saved_argv = sys.modules["__main__"], sys.argv
    sys.modules["__main__"], sys.argv = module, [str(path), *args]
    sys.path.insert(0, str(path.parent))
    try:
        with in_workflow_folder(path):
            tasks = None
            with _process_hands_over():
                try:
                    exec(compile(path.read_text(), str(path), "exec"), module.__dict__)  # noqa: S102
                except _Handover as handover:
                    tasks = handover.tasks
            if tasks is None:
                raise SystemExit(f"b2batch: {script} ended without calling b2batch.process(): no tasks to show")
            yield Workflow(path, module.__dict__, tasks)
    finally:
        sys.modules["__main__"], sys.argv = saved_main, saved_argv


def _mark(done: bool) -> Text:
    return Text("✓", style="green") if done else Text("✗", style="red")


def _targets(task: Any) -> list[Any]:
    return luigi.task.flatten(task.output())


def dependency_tree(tasks: list[Any], outputs: bool, params: bool = True, status: bool = True) -> Tree:
    """The tasks and their requirements as a rich Tree; a task required again is shown once and referred to."""
    root = Tree(Text("Task graph", style="bold"))
    seen: set[str] = set()

    def add(parent: Tree, task: Any) -> None:
        name = str(task) if params else task.task_family
        if task.task_id in seen:
            parent.add(Text(f"↳ {name} (shown above)", style="dim"))
            return
        seen.add(task.task_id)
        label = Text(name, style="bold")
        if status:
            label = Text.assemble(_mark(task.complete() and outputs_counted(task)), " ", label)
        branch = parent.add(label)
        if outputs:
            for target in _targets(task):
                branch.add(Text.assemble(_mark(target.exists()), " ", str(getattr(target, "path", target))))
        for requirement in luigi.task.flatten(task.requires()):
            add(branch, requirement)

    for task in tasks:
        add(root, task)
    return root


def dot_graph(tasks: list[Any], params: bool = True) -> str:
    """The dependency graph in Graphviz's DOT language (``| dot -Tpng -o graph.png``)."""

    def quoted(text: str) -> str:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'

    lines = ["digraph workflow {", "    rankdir=TB;"]
    for task, complete in graph_outputs.walk(tasks):
        colour = "palegreen" if complete else "lightpink"
        label = str(task) if params else task.task_family
        lines.append(f"    {quoted(task.task_id)} [label={quoted(label)}, style=filled, fillcolor={colour}];")
        for requirement in luigi.task.flatten(task.requires()):
            lines.append(f"    {quoted(task.task_id)} -> {quoted(requirement.task_id)};")
    return "\n".join(lines + ["}"]) + "\n"


def task_classes(namespace: dict[str, Any]) -> list[type]:
    """The task classes a workflow script defines or imports (not b2batch's or luigi's own)."""
    return [value for value in namespace.values()
            if isinstance(value, type) and issubclass(value, luigi.Task)
            and value.__module__.split(".")[0] not in ("luigi", "b2batch", "b2luigi")]


def _parameters(task_class: type) -> str:
    return ", ".join(f"{name} ({type(param).__name__})" for name, param in task_class.get_params()) or "-"


def job_folders(tasks: list[Any]) -> set[Path]:
    """Where the job folders of every task of the graph are, whether they exist or not (``b2batch status``
    lists these)."""
    from b2batch.luigi_frontend.task_outputs import task_files

    return {task_files(task).folder.resolve() for task, _complete in graph_outputs.walk(tasks)}


def cleanup_paths(tasks: list[Any]) -> list[Path]:
    """The log and job folders of the complete tasks of the graph that exist."""
    from b2batch.luigi_frontend.task_outputs import task_files

    found = []
    for task, complete in graph_outputs.walk(tasks):
        if complete:
            found += [p for p in (layout.log_folder(task), task_files(task).folder) if p.exists()]
    return found


# --- the commands -------------------------------------------------------------------------------------------

def add_commands(commands: Any) -> None:
    """Add the commands to the ``b2batch`` console script's subparsers."""
    for name, help_text in COMMANDS.items():
        sub = commands.add_parser(name, help=help_text, description=help_text)
        if name == "show":
            sub.add_argument("--paths", action="store_true", help="Print only the output paths, one a line.")
        if name == "graph":
            sub.add_argument("--dot", action="store_true", help="Print the graph in Graphviz's DOT language.")
            sub.add_argument("--no-params", action="store_true", help="Name tasks by class only.")
        if name == "remove":
            sub.add_argument("-t", "--task", action="append", default=[],
                             help="Remove the outputs of this task class's tasks (repeatable).")
            sub.add_argument("--with-requirements", action="store_true",
                             help="Also remove the outputs of everything they require.")
        if name in ("remove", "cleanup"):
            sub.add_argument("-y", "--yes", action="store_true", help="Do not ask first.")
        sub.add_argument("script", help="the workflow script")
        sub.add_argument("args", nargs=argparse.REMAINDER, help="the script's own arguments")


def run_command(args: argparse.Namespace) -> int:
    """Run the command ``args.command`` on the workflow ``args.script``; the exit status."""
    with loaded(args.script, args.args) as flow, remote_checks():
        return globals()[f"_{args.command}"](flow, args)


def _show(flow: Workflow, args: argparse.Namespace) -> int:
    if args.paths:
        for task, _complete in graph_outputs.walk(flow.tasks):
            for target in _targets(task):
                print(getattr(target, "path", target))
        return 0
    terminal().print(dependency_tree(flow.tasks, outputs=True))
    return 0


def _graph(flow: Workflow, args: argparse.Namespace) -> int:
    if args.dot:
        sys.stdout.write(dot_graph(flow.tasks, params=not args.no_params))
    else:
        terminal().print(dependency_tree(flow.tasks, outputs=False, params=not args.no_params))
    return 0


def _tasks(flow: Workflow, args: argparse.Namespace) -> int:
    table = Table(title=f"Task classes of {flow.script.name}")
    for column in ("Task", "Parameters", "Description"):
        table.add_column(column)
    for task_class in task_classes(flow.namespace):
        doc = (task_class.__doc__ or "").strip().splitlines()
        table.add_row(task_class.__name__, _parameters(task_class), doc[0] if doc else "")
    terminal().print(table)
    return 0


def _remove(flow: Workflow, args: argparse.Namespace) -> int:
    graph = [task for task, _complete in graph_outputs.walk(flow.tasks)]
    chosen = [t for t in graph if t.task_family in args.task] if args.task else list(flow.tasks)
    unknown = sorted(set(args.task) - {t.task_family for t in graph})
    if unknown:
        print(f"Not in the workflow's graph: {', '.join(unknown)}", file=sys.stderr)
        return 1
    if args.with_requirements:
        chosen = [task for task, _complete in graph_outputs.walk(chosen)]
    graph_outputs.remove_outputs(chosen, ask=not args.yes)
    return 0


def _cleanup(flow: Workflow, args: argparse.Namespace) -> int:
    found = cleanup_paths(flow.tasks)
    if not found:
        print("Nothing to clean up: no complete task has log or job files.")
        return 0
    for path in found:
        print(f"  {path}")
    if not args.yes and not confirm(f"Remove these {len(found)} folder(s) of complete tasks?"):
        print("Nothing removed (pass --yes to remove without asking).")
        return 1
    for path in found:
        shutil.rmtree(path, ignore_errors=True)
    print(f"Removed the log and job files of complete tasks: {len(found)} folder(s).")
    return 0
