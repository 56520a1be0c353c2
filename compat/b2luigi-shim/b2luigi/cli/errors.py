"""``b2luigi.cli.errors``: the error of a wrong command line (``CliUserError``: its text is shown in a red
panel titled ``b2luigi``, after ``Error: ``, and the command ends with its ``exit_code``, 2)."""

from __future__ import annotations

import difflib

from rich.console import Console
from rich.panel import Panel
from rich.text import Text

from b2batch.luigi_frontend.generators import CliUserError

__all__ = ["CliUserError", "console"]

#: Where the error panel goes (b2luigi's module has this console too; tests replace it).
console = Console()


def _render_cli_error(msg: str) -> None:
    """The panel of an error. ``msg`` is plain text, never rich markup: a parameter such as ``[/x]`` or
    ``[bold]`` in it is shown as it is."""
    text = Text("Error: ", style="bold red")
    text.append(msg)
    console.print(Panel.fit(text, title="b2luigi", border_style="red"))


def suggest(bad: str, candidates: list[str]) -> str | None:
    """The candidate closest to ``bad``, if any is close enough."""
    close = difflib.get_close_matches(bad, candidates, n=1, cutoff=0.6)
    return close[0] if close else None
