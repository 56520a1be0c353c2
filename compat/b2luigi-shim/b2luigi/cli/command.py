"""The ``b2luigi`` command (``b2luigi.cli.app``, ``b2luigi.cli.main``): the typer app with the subcommands
``run``, ``show``, ``remove``, ``cleanup``, ``test``, ``tasks``, ``graph``, the hidden ``batch-runner``, and
``about``, ``init``, ``version``, ``self-update``, ``--version``."""

import os
import platform
import subprocess
import sys
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as installed_version
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.panel import Panel

from b2batch.jobscript import base_folder
from b2luigi.cli.apps.batch_runner import batch_runner_app
from b2luigi.cli.apps.cleanup import cleanup_app
from b2luigi.cli.apps.graph import graph_app
from b2luigi.cli.apps.remove import remove_app
from b2luigi.cli.apps.run import run_app
from b2luigi.cli.apps.show import show_app
from b2luigi.cli.apps.tasks import tasks_app
from b2luigi.cli.errors import CliUserError, _render_cli_error
from b2luigi.cli.templates import PARAMS_TEMPLATE, TASKS_TEMPLATE

__all__ = ["app", "get_b2luigi_version", "main"]


def get_b2luigi_version() -> str:
    """The version of the installed distribution that provides ``b2luigi`` (the shim's, or b2luigi's)."""
    for distribution in ("b2luigi", "b2luigi-shim-for-b2batch"):
        try:
            return installed_version(distribution)
        except PackageNotFoundError:
            continue
    return "0.0.0"


def _print_version(value: bool) -> None:
    if value:
        typer.echo(get_b2luigi_version())
        raise typer.Exit()


app = typer.Typer(name="b2luigi", help="Run user-defined b2luigi tasks", add_completion=True, no_args_is_help=True)
app.add_typer(run_app, name="run")
app.add_typer(show_app, name="show")
app.add_typer(remove_app, name="remove")
app.add_typer(cleanup_app, name="cleanup")
try:  # ``b2luigi test``, in its own module
    from b2luigi.cli.apps.test import test_app
except ModuleNotFoundError as missing:
    if missing.name != "b2luigi.cli.apps.test":
        raise
else:
    app.add_typer(test_app, name="test")
app.add_typer(tasks_app, name="tasks")
app.add_typer(batch_runner_app, name="batch-runner", hidden=True)
app.add_typer(graph_app, name="graph")

console = Console()


def _base_folder() -> str:
    """The folder relative settings (``result_dir``, ``log_dir``) are relative to, as b2luigi's command
    has it: that of ``$B2LUIGI_TASK_FILE``, else the working directory (not the folder of the ``b2luigi``
    script, which would be b2batch's rule for a ``__main__`` that is not a ``.py`` file)."""
    task_file = os.environ.get("B2LUIGI_TASK_FILE")
    return os.path.dirname(os.path.abspath(task_file)) if task_file else os.path.abspath(os.getcwd())


@app.callback()
def main_callback(
    ctx: typer.Context,
    version: Annotated[Optional[bool], typer.Option("--version", "-V", "-v", callback=_print_version, is_eager=True,
                                                    help="Show the version and exit.")] = None,
) -> None:
    """b2luigi — Belle II extension of the Luigi workflow management framework."""
    ctx.with_resource(base_folder.base_dir_pinned(_base_folder()))  # for this command only (it ends with it)


@app.command("about")
def about() -> None:
    """Show environment and b2luigi installation info."""
    lines = [f"b2luigi: {get_b2luigi_version()}", f"python: {sys.version.split()[0]}",
             f"platform: {platform.platform()}", f"cwd: {os.getcwd()}"]
    lines += [f"{name}: {os.getenv(name, '(unset)')}" for name in ("B2LUIGI_TASK_FILE", "B2LUIGI_PARAMS_FILE")]
    console.print(Panel.fit("\n".join(lines), title="About", border_style="cyan"))


@app.command("init")
def init(force: Annotated[bool, typer.Option("--force", help="Overwrite existing files.")] = False) -> None:
    """Create starter tasks.py, parameters.py, and optional config."""
    for name, text in (("tasks.py", TASKS_TEMPLATE), ("parameters.py", PARAMS_TEMPLATE)):
        path = Path(name)
        if path.exists() and not force:
            console.print(f"[yellow]Skip[/yellow] {name} (already exists)")
            continue
        path.write_text(text, encoding="utf-8")
        console.print(f"[green]Wrote[/green] {name}")


@app.command("version")
def version() -> None:
    """Print version and exit."""
    console.print(get_b2luigi_version())


@app.command("self-update")
def self_update() -> None:
    """Update b2luigi to the latest version in the current environment."""
    # Here b2luigi is b2batch's shim: updating means updating b2batch (the shim is installed from its checkout).
    before = installed_version("b2batch")
    subprocess.check_call([sys.executable, "-m", "pip", "install", "--upgrade", "b2batch"])
    after = installed_version("b2batch")
    if after == before:
        console.print(f"[yellow]b2batch (b2luigi's shim) is already up-to-date ({after}).[/yellow]")
    else:
        console.print(f"[green]b2batch (b2luigi's shim) updated: {before} → {after}[/green]")


#: The click command of the app (documentation tools read it).
_click_app = typer.main.get_command(app)


def main() -> None:
    """The console script ``b2luigi``: a ``CliUserError`` is shown as b2luigi shows it and ends the command
    with its exit code (2)."""
    try:
        app()
    except CliUserError as e:
        _render_cli_error(str(e))
        raise SystemExit(e.exit_code) from None
