"""``b2luigi graph [NAMES]``: the dependency graph as a tree (``--format tree``), as Graphviz DOT
(``--format dot``) or as per-class completion counts (``--summary``)."""

from typing import Annotated

import typer

from b2luigi.cli import runner
from b2luigi.cli.apps.selection import select
from b2luigi.cli.errors import CliUserError
from b2luigi.cli.options import Params, ParamsFile, TaskFile, class_names_arg
from b2luigi.cli.utils import cli_error_boundary, resolve_task_context

graph_app = typer.Typer(name="graph", context_settings={"allow_interspersed_args": True},
                        help="Render the task dependency graph as a tree (terminal) or DOT (Graphviz).")


def graph_task(classnames: list[str] | None = None, task_filename: str | None = None,
               parameter_filename: str | None = None, params: list[str] | None = None, output_format: str = "tree",
               with_params: bool = False, show_status: bool = False, summary: bool = False) -> None:
    """Print the graph of the named tasks (without names: of the whole project)."""
    if summary and output_format == "dot":
        raise CliUserError("--summary cannot be combined with --format dot: a summary is not a graph serialization.")
    if summary and with_params:
        raise CliUserError("--summary cannot be combined with --params: parameter values are per-instance, and the "
                           "summary reports per-class counts.")
    ctx = resolve_task_context(task_filename, parameter_filename, params)
    tasks = select(ctx, classnames, consider_requirements=True)
    if summary:
        runner.render_graph_summary(tasks)
    elif output_format == "dot":
        runner.render_graph_dot(tasks, show_params=with_params, show_status=show_status)
    else:
        runner.render_graph_tree(tasks, show_params=with_params, show_status=show_status)


@graph_app.callback(invoke_without_command=True)
def graph(
    ctx: typer.Context,
    classnames: class_names_arg("Task class name(s) to scope the graph to. Omit for the full graph.") = None,
    task_filename: TaskFile = None,
    parameter_filename: ParamsFile = None,
    params: Params = None,
    output_format: Annotated[str, typer.Option(
        "--format", help="Output format: 'tree' (Rich terminal, default) or 'dot' (Graphviz DOT to stdout).")] = "tree",
    with_params: Annotated[bool, typer.Option("--params", help="Include parameter values on each node.")] = False,
    show_status: Annotated[bool, typer.Option(
        "--status", "-s", help="Check and display output completion status on each node.")] = False,
    summary: Annotated[bool, typer.Option(
        "--summary", help="Print per-class completion counts instead of the dependency tree. Cannot be combined "
                          "with --format dot or --params.")] = False,
) -> None:
    """Render the task dependency graph.

    Without positional names renders the full dependency graph. With one or more names scopes the graph to
    those tasks' subtrees.
    """
    if ctx.invoked_subcommand is not None:
        return
    with cli_error_boundary():
        graph_task(classnames=classnames, task_filename=task_filename, parameter_filename=parameter_filename,
                   params=params, output_format=output_format, with_params=with_params, show_status=show_status,
                   summary=summary)
