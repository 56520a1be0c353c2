"""``b2luigi show [NAMES]``: the output files of the tasks (without names: of every task of the project's
graphs), each with ✓ (there) or ✗."""

from typing import Annotated

import typer

from b2luigi.cli import runner
from b2luigi.cli.apps.selection import select
from b2luigi.cli.options import Params, ParamsFile, TaskFile, class_names_arg
from b2luigi.cli.utils import cli_error_boundary, resolve_task_context

show_app = typer.Typer(name="show", context_settings={"allow_interspersed_args": True},
                       help="Show output files of task(s). Without a task name shows the full dependency tree.")


def show_task(classnames: list[str] | None = None, task_filename: str | None = None,
              parameter_filename: str | None = None, params: list[str] | None = None, direct: bool = False,
              with_requirements: bool = False, details: bool = False, paths_only: bool = False,
              links: bool = False) -> None:
    """Print the outputs of the named tasks (with ``with_requirements`` and without names: of their graphs)."""
    ctx = resolve_task_context(task_filename, parameter_filename, params)
    tasks = select(ctx, classnames, consider_requirements=with_requirements, direct=direct)
    if classnames is None:
        runner.show_all_outputs(tasks, details=details, paths_only=paths_only, links=links)
    elif with_requirements:
        runner.show_all_outputs(tasks, show_required_by=True, details=details, paths_only=paths_only, links=links)
    else:
        runner.show_task_outputs(tasks, details=details, paths_only=paths_only, links=links)


@show_app.callback(invoke_without_command=True)
def show(
    ctx: typer.Context,
    classnames: class_names_arg("Task class name(s) to show. Omit to show the full dependency tree for all tasks.") = None,
    task_filename: TaskFile = None,
    parameter_filename: ParamsFile = None,
    params: Params = None,
    direct: Annotated[bool, typer.Option(
        "--direct", help="Skip dependency graph traversal. Requires all target task parameters to be resolvable "
                         "from parameters.py or --param. Useful for large graphs.")] = False,
    with_requirements: Annotated[bool, typer.Option(
        "--with-requirements", help="Also show outputs of all tasks that the specified task(s) require. Requires "
                                    "positional task name(s).")] = False,
    details: Annotated[bool, typer.Option(
        "--details", help="Show the Output key-name column, and (for tasks resolving to multiple parameter "
                          "combinations) the Params column. Both are hidden by default.")] = False,
    paths_only: Annotated[bool, typer.Option(
        "--paths", help="Print one bare output path per line, with no table or styling. Suitable for piping.")] = False,
    links: Annotated[bool, typer.Option(
        "--links", help="Make local output paths clickable via terminal hyperlinks. Ignored for remote targets, and "
                        "note the link resolves on the machine your terminal runs on — not over SSH.")] = False,
) -> None:
    """Show output files of task(s).

    Without positional names shows the full dependency tree for all tasks in ``tasks.py``.
    With one or more names shows only those tasks.
    """
    if ctx.invoked_subcommand is not None:
        return
    with cli_error_boundary():
        show_task(classnames=classnames, task_filename=task_filename, parameter_filename=parameter_filename,
                  params=params, direct=direct, with_requirements=with_requirements, details=details,
                  paths_only=paths_only, links=links)
