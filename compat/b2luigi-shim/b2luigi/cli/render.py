"""What ``show``, ``graph`` and ``tasks`` print, as b2luigi 1.3 prints it: per task class a panel of output
paths with ✓/✗, the dependency tree (rich) or its Graphviz DOT text, the per-class completion summary, and
the task list and a task's help. Everything goes to ``output.console`` (``runner.console``; looked up at each
call, so that a replaced console is used); ``--paths`` and DOT are plain ``print`` for pipes."""

from __future__ import annotations

import collections
import inspect
import os
import pathlib
from collections.abc import Iterable
from typing import Any

import luigi
import luigi.task
from rich import box
from rich.markdown import Markdown
from rich.panel import Panel
from rich.style import Style
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from b2luigi.cli import output
from b2luigi.core.utils import (flatten_to_dict, flatten_to_file_paths, get_serialized_parameters,
                                               task_iterator)

__all__ = ["get_task_outputs", "render_graph_dot", "render_graph_summary", "render_graph_tree",
           "render_task_help", "render_task_list", "show_all_outputs", "show_task_outputs"]


def _console() -> Any:
    return output.console


def get_task_outputs(task: Any) -> dict[str, list[dict[str, Any]]]:
    """The task's outputs by key: each a dict of ``exists``, ``parameters``, ``file_name`` (absolute) and
    ``is_local`` (a ``luigi.LocalTarget``: only those are linked by ``--links``)."""
    outputs: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for key, target in flatten_to_dict(task.output()).items():
        file_key, names = flatten_to_file_paths({key: target}).popitem()
        outputs[file_key].append({"exists": target.exists(), "parameters": get_serialized_parameters(task),
                                  "file_name": os.path.abspath(names[-1]),
                                  "is_local": isinstance(target, luigi.LocalTarget)})
    return outputs


def _build_parent_map(root_tasks: list[Any]) -> dict[str, list[str]]:
    """For each task of the graphs (by id): the class names of the tasks that require it directly, in the
    order met breadth first, each name once."""
    parents: dict[str, list[str]] = {}
    queue = collections.deque(root_tasks)
    done: set[str] = set()
    while queue:
        task = queue.popleft()
        if task.task_id in done:
            continue
        done.add(task.task_id)
        for required in luigi.task.flatten(task.requires()):
            names = parents.setdefault(required.task_id, [])
            if type(task).__name__ not in names:
                names.append(type(task).__name__)
            if required.task_id not in done:
                queue.append(required)
    return parents


def _params_text(task: Any, separator: str = ", ") -> str:
    return separator.join(f"{k}={v}" for k, v in get_serialized_parameters(task).items())


def _render_task_outputs(task_output_pairs: Iterable[tuple[Any, dict[str, list[dict[str, Any]]]]],
                         required_by_map: dict[str, list[str]] | None = None, details: bool = False,
                         paths_only: bool = False, links: bool = False) -> None:
    """Per task class one panel: ``Location`` and ✓/✗ (``details``: the output key too, and the parameters
    when the class has several tasks); with ``required_by_map`` the panel's subtitle names the classes that
    require them. ``paths_only``: one path a line, nothing else. Paths are folded, never cut; a table wider
    than the terminal gets rules between its rows."""
    if paths_only:
        for _task, outputs in task_output_pairs:
            for entries in outputs.values():
                for entry in entries:
                    print(entry["file_name"])
        return
    console = _console()
    by_class: dict[str, list[tuple[Any, dict[str, list[dict[str, Any]]]]]] = {}
    for task, outputs in task_output_pairs:
        by_class.setdefault(type(task).__name__, []).append((task, outputs))
    for name, pairs in by_class.items():
        with_params = details and len(pairs) > 1
        table = Table(show_header=True, header_style="bold", show_lines=False, box=None)
        if with_params:
            table.add_column("Params", style="dim")
        if details:
            table.add_column("Output", style="dim")
        table.add_column("Location", overflow="fold")
        table.add_column("", justify="center", no_wrap=True)
        for task, outputs in pairs:
            params = _params_text(task) if with_params else ""
            for key, entries in outputs.items():
                for entry in entries:
                    location = Text(entry["file_name"])  # plain text: brackets in a path are not markup
                    if links and entry.get("is_local", False):
                        location.stylize(Style(link=pathlib.Path(entry["file_name"]).as_uri()))
                    row: list[Any] = ([params] if with_params else []) + ([key] if details else [])
                    table.add_row(*row, location, "[green]✓[/green]" if entry["exists"] else "[red]✗[/red]")
        subtitle = None
        if required_by_map is not None:
            names: list[str] = []
            for task, _outputs in pairs:
                names += [n for n in required_by_map.get(task.task_id, []) if n not in names]
            if names:
                subtitle = f"[dim]required by: {', '.join(names)}[/dim]"
        if console.measure(table).maximum > console.width - 4:  # folded rows: keep them apart
            table.box = box.HORIZONTALS
            table.show_lines = True
        console.print(Panel(table, title=f"[bold]{name}[/bold]", subtitle=subtitle, border_style="cyan"))


def show_task_outputs(task_list: list[Any], details: bool = False, paths_only: bool = False,
                      links: bool = False) -> None:
    """The outputs of these tasks only."""
    _render_task_outputs(((task, get_task_outputs(task)) for task in task_list), details=details,
                         paths_only=paths_only, links=links)


def show_all_outputs(task_list: list[Any], show_required_by: bool = False, details: bool = False,
                     paths_only: bool = False, links: bool = False) -> None:
    """The outputs of every task of the graphs of ``task_list`` (each task once)."""
    pairs: dict[str, tuple[Any, Any]] = {}
    for root in task_list:
        for task in task_iterator(root):
            if task.task_id not in pairs:
                pairs[task.task_id] = (task, get_task_outputs(task))
    parents = _build_parent_map(task_list) if show_required_by else None
    _render_task_outputs(list(pairs.values()), required_by_map=parents, details=details, paths_only=paths_only,
                         links=links)


def _complete(task: Any) -> bool | None:
    """True/False: all outputs exist or not; None: the task has no outputs."""
    outputs = luigi.task.flatten(task.output())
    return all(target.exists() for target in outputs) if outputs else None


def render_graph_tree(task_list: list[Any], show_params: bool = False, show_status: bool = False) -> None:
    """The graphs as a tree under ``Task Graph``; a task met again is ``↳ Name (already shown above)``."""
    shown: set[str] = set()

    def label(task: Any) -> str:
        text = type(task).__name__
        params = _params_text(task) if show_params else ""
        if params:
            text += f"({params})"
        state = _complete(task) if show_status else None
        if state is not None:
            text += " [green]✓[/green]" if state else " [red]✗[/red]"
        return text

    def add(parent: Tree, task: Any) -> None:
        if task.task_id in shown:
            parent.add(f"[dim]↳ {type(task).__name__} (already shown above)[/dim]")
            return
        shown.add(task.task_id)
        branch = parent.add(label(task))
        for required in luigi.task.flatten(task.requires()):
            add(branch, required)

    tree = Tree("[bold]Task Graph[/bold]")
    for task in task_list:
        add(tree, task)
    _console().print(tree)


def _dot_quoted(text: str) -> str:
    return text.replace('"', '\\"')


def render_graph_dot(task_list: list[Any], show_params: bool = False, show_status: bool = False) -> None:
    """The graphs as Graphviz DOT on stdout: one node per task (by task id), an edge per requirement."""
    nodes: dict[str, str] = {}
    edges: list[tuple[str, str]] = []

    def visit(task: Any) -> None:
        if task.task_id in nodes:
            return
        text = type(task).__name__
        params = _params_text(task, "\\n") if show_params else ""
        if params:
            text += "\\n" + params
        attributes = [f'label="{_dot_quoted(text)}"']
        state = _complete(task) if show_status else None
        if state is not None:
            attributes.append(f"style=filled, fillcolor={'green' if state else 'red'}")
        nodes[task.task_id] = ", ".join(attributes)
        for required in luigi.task.flatten(task.requires()):
            edges.append((task.task_id, required.task_id))
            visit(required)

    for task in task_list:
        visit(task)
    lines = ["digraph {", '    rankdir="TB";']
    lines += [f'    "{_dot_quoted(task_id)}" [{attributes}];' for task_id, attributes in nodes.items()]
    lines += [f'    "{_dot_quoted(a)}" -> "{_dot_quoted(b)}";' for a, b in edges]
    print("\n".join(lines + ["}"]))


def render_graph_summary(task_list: list[Any]) -> None:
    """Per task class (tasks without outputs left out) ``complete/total`` and ``complete``/``incomplete``,
    then the total with its percentage (rounded down). Classes that share a name are shown as module.Class."""
    counts: dict[type, list[int]] = {}
    seen: set[tuple[type, str]] = set()
    for root in task_list:
        for task in task_iterator(root):
            if (type(task), task.task_id) in seen:
                continue
            seen.add((type(task), task.task_id))
            state = _complete(task)
            if state is None:
                continue
            count = counts.setdefault(type(task), [0, 0])
            count[0] += int(state)
            count[1] += 1
    console = _console()
    if not counts:
        console.print("No tasks with outputs to summarise.")
        return
    uses = collections.Counter(cls.__name__ for cls in counts)
    table = Table(title="Task Graph Summary", box=box.HORIZONTALS, title_justify="left")
    table.add_column("Task", overflow="fold")
    table.add_column("Complete", justify="right")
    table.add_column("Status")
    for cls, (complete, total) in counts.items():
        name = f"{cls.__module__}.{cls.__name__}" if uses[cls.__name__] > 1 else cls.__name__
        table.add_row(Text(name), f"{complete}/{total}", "complete" if complete == total else "incomplete")
    done = sum(c for c, _t in counts.values())
    total = sum(t for _c, t in counts.values())
    table.add_section()
    table.add_row(Text("total"), f"{done}/{total}", f"({done * 100 // total}%)")
    console.print(table)


def render_task_list(entries: list[tuple[type, str]]) -> None:
    """The table ``Available Tasks`` (name, module, first line of the docstring) in a ``b2luigi`` panel."""
    table = Table(title="Available Tasks", show_lines=False)
    table.add_column("Task", style="bold")
    table.add_column("Module", style="dim")
    table.add_column("Description")
    for cls, module in entries:
        lines = (cls.__doc__ or "").strip().splitlines()
        table.add_row(cls.__name__, module, lines[0].strip() if lines else "")
    _console().print(Panel.fit(table, title="b2luigi", border_style="cyan"))


def render_task_help(cls: type) -> None:
    """The task's docstring (markdown) in a panel titled with its name, then its parameters (name, type,
    default) in a panel ``Parameters``."""
    console = _console()
    console.print(Panel.fit(Markdown(inspect.getdoc(cls) or "(No docstring provided.)"), title=cls.__name__,
                            border_style="cyan"))
    params = cls.get_params()
    if not params:
        return
    table = Table(show_header=True, header_style="bold", show_lines=False, box=None)
    table.add_column("Parameter", style="bold")
    table.add_column("Type")
    table.add_column("Default")
    for name, param in params:
        # b2luigi reads a ``default`` attribute, which luigi's parameters do not have: "(required)" unless a
        # parameter class defines one.
        default = getattr(param, "default", None) if hasattr(param, "default") else None
        table.add_row(name, type(param).__name__, str(default) if hasattr(param, "default") else "(required)")
    console.print(Panel(table, title="Parameters", border_style="cyan"))
