"""``b2luigi remove [NAMES]``: remove the outputs of the named tasks (without names: of every project task;
``--with-requirements``: and of what they require)."""

from typing import Annotated, Optional

import typer

from b2luigi.cli import runner
from b2luigi.cli.options import Params, ParamsFile, TaskFile, class_names_arg
from b2luigi.cli.utils import cli_error_boundary, resolve_removal_targets

remove_app = typer.Typer(name="remove", help="Remove output files of task(s).",
                         context_settings={"allow_interspersed_args": True})

#: The options ``remove`` and ``cleanup`` share.
Yes = Annotated[bool, typer.Option("-y", "--yes", help="Skip confirmation prompt.")]
Direct = Annotated[bool, typer.Option(
    "--direct", help="Skip dependency graph traversal. Requires all target task parameters to be resolvable from "
                     "parameters.py or --param. Useful for large graphs.")]


def remove_or_cleanup(classnames: list[str] | None, task_filename: str | None, parameter_filename: str | None,
                      params: list[str] | None, yes: bool, keep: str | None, direct: bool, with_requirements: bool,
                      **action: object) -> None:
    """Choose the tasks as ``remove`` does and call ``action``'s methods (default: ``remove_output``) on them."""
    targets = resolve_removal_targets(task_filename, parameter_filename, params, classnames, keep, direct,
                                      with_requirements)
    if with_requirements and targets.named:
        runner.remove_requirement_outputs(targets.task_list, auto_confirm=yes, keep_tasks=targets.keep_names,
                                          **action)  # type: ignore[arg-type]
    else:
        runner.remove_outputs(targets.task_list, target_tasks=targets.target_names, auto_confirm=yes,
                              keep_tasks=targets.keep_names, **action)  # type: ignore[arg-type]


@remove_app.callback(invoke_without_command=True)
def remove(
    classnames: class_names_arg("Task class name(s) to remove. Omit to remove outputs for all project tasks "
                                "(everything b2luigi tasks lists, not just names in tasks.py).") = None,
    task_filename: TaskFile = None,
    parameter_filename: ParamsFile = None,
    yes: Yes = False,
    keep: Annotated[Optional[str], typer.Option(
        "--keep", help="Comma-separated task class names whose outputs should NOT be removed. Names are validated; "
                       "dotted module.Class names are accepted.")] = None,
    params: Params = None,
    direct: Direct = False,
    with_requirements: Annotated[bool, typer.Option(
        "--with-requirements", help="Also remove outputs of all tasks that the named task(s) require.")] = False,
) -> None:
    """Remove output files of the named task(s).

    Without positional names removes outputs for every project task. By default removes only the named tasks;
    pass ``--with-requirements`` to also remove their transitive requirements.
    """
    with cli_error_boundary():
        remove_or_cleanup(classnames, task_filename, parameter_filename, params, yes, keep, direct,
                          with_requirements)
