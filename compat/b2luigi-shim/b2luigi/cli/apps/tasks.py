"""``b2luigi tasks``: the task classes of the project (name, module, first docstring line);
``b2luigi tasks info [NAME]``: a class's docstring and parameters."""

from typing import Annotated, Optional

import typer

from b2luigi.cli import runner
from b2luigi.cli.errors import CliUserError
from b2luigi.cli.options import TaskFile
from b2luigi.cli.utils import (Defaults, TaskIndex, build_task_index, cli_error_boundary,
                                               complete_task_names, resolve_defaults)

tasks_app = typer.Typer(name="tasks", help="List and inspect available task classes.")


def _load_task_index(task_filename: Optional[str]) -> tuple[TaskIndex, Defaults]:
    files = resolve_defaults(task_filename, None)
    index = build_task_index(files.task_file)
    if not index.all_classes():
        raise CliUserError(f"No b2luigi task classes found in '{files.task_file}'. Ensure your classes subclass "
                           f"b2luigi.Task.")
    return index, files


def list_tasks(task_filename: Optional[str] = None) -> None:
    index, _files = _load_task_index(task_filename)
    runner.render_task_list([(cls, index.display_module(cls)) for cls in index.all_classes()])


def show_task_info(classname: Optional[str] = None, task_filename: Optional[str] = None) -> None:
    index, _files = _load_task_index(task_filename)
    classes = [index.resolve(classname, hint_cmd="b2luigi tasks info")] if classname is not None else index.all_classes()
    for cls in classes:
        runner.render_task_help(cls)


@tasks_app.callback(invoke_without_command=True)
def tasks(ctx: typer.Context, task_filename: TaskFile = None) -> None:
    """List all available task classes."""
    if ctx.invoked_subcommand is not None:
        return
    with cli_error_boundary():
        list_tasks(task_filename)


@tasks_app.command("info")
def task_info(
    classname: Annotated[Optional[str], typer.Argument(
        help="Task class name to show info for. Omit to show info for all tasks.",
        shell_complete=complete_task_names)] = None,
    task_filename: TaskFile = None,
) -> None:
    """Show docstring and parameters for a task class, or all task classes if omitted."""
    with cli_error_boundary():
        show_task_info(classname, task_filename)
