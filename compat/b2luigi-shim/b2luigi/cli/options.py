"""The options several subcommands share (``--task-file``/``-f``, ``--params-file``/``-p``,
``--param``/``-P``) and the task-name argument, defined once so that their names and help agree.

No ``from __future__ import annotations`` here: typer reads these annotations at run time.
"""

from typing import Annotated, Any

import typer

from b2luigi.cli.utils import complete_task_names

TaskFile = Annotated[
    str | None,
    typer.Option("--task-file", "-f", help="Task definitions file (or $B2LUIGI_TASK_FILE)"),
]

ParamsFile = Annotated[
    str | None,
    typer.Option("--params-file", "-p", help="Parameters file (or $B2LUIGI_PARAMS_FILE)"),
]

Params = Annotated[
    list[str] | None,
    typer.Option("--param", "-P",
                 help="Override task parameters (repeatable): key=value. Values are parsed as JSON when possible."),
]


def class_names_arg(help_text: str) -> Any:
    """The optional list of task names of a subcommand, with its own help text and name completion."""
    return Annotated[list[str] | None, typer.Argument(help=help_text, shell_complete=complete_task_names)]
