"""``b2luigi cleanup [NAMES]``: remove the log folders and batch submission files of tasks (never their
outputs), the tasks chosen as ``remove`` chooses them."""

from typing import Annotated, Optional

import typer

from b2luigi.cli.apps.remove import Direct, Yes, remove_or_cleanup
from b2luigi.cli.errors import CliUserError
from b2luigi.cli.options import Params, ParamsFile, TaskFile, class_names_arg
from b2luigi.cli.utils import cli_error_boundary

cleanup_app = typer.Typer(name="cleanup", help="Remove log files and batch submission files of task(s).",
                          context_settings={"allow_interspersed_args": True})


def cleanup_methods(logs_only: bool, task_files_only: bool) -> tuple[tuple[str, ...], str]:
    """The task methods to call and the word for what they remove."""
    if logs_only and task_files_only:
        raise CliUserError("--logs-only and --task-files-only exclude each other; omit both to remove both.")
    if logs_only:
        return ("remove_log_files",), "log files"
    if task_files_only:
        return ("remove_task_files",), "task files"
    return ("remove_log_files", "remove_task_files"), "log and task files"


@cleanup_app.callback(invoke_without_command=True)
def cleanup(
    classnames: class_names_arg("Task class name(s) to clean up. Omit to clean up all project tasks (everything "
                                "b2luigi tasks lists, not just names in tasks.py).") = None,
    task_filename: TaskFile = None,
    parameter_filename: ParamsFile = None,
    yes: Yes = False,
    keep: Annotated[Optional[str], typer.Option(
        "--keep", help="Comma-separated task class names whose files should NOT be removed. Names are validated; "
                       "dotted module.Class names are accepted.")] = None,
    params: Params = None,
    direct: Direct = False,
    with_requirements: Annotated[bool, typer.Option(
        "--with-requirements", help="Also clean up all tasks that the named task(s) require.")] = False,
    logs_only: Annotated[bool, typer.Option(
        "--logs-only", help="Only remove the log directories (stdout, stderr, batch job logs).")] = False,
    task_files_only: Annotated[bool, typer.Option(
        "--task-files-only", help="Only remove the task-file directories (submission files, wrappers).")] = False,
) -> None:
    """Remove the log and batch submission files of the named task(s); their outputs stay."""
    with cli_error_boundary():
        methods, noun = cleanup_methods(logs_only, task_files_only)
        remove_or_cleanup(classnames, task_filename, parameter_filename, params, yes, keep, direct,
                          with_requirements, methods=methods, noun=noun)
