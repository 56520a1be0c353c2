"""Where the ``b2luigi`` command prints: ``console`` (stdout) and ``stderr_console`` (warnings, apart from stdout:
``show --paths`` and ``graph --format dot`` are piped). b2luigi 1.3 has them in ``b2luigi.cli.runner``, where
its users replace them to capture the output: ``runner.console`` and ``runner.stderr_console`` read and replace
these (``runner``'s module class forwards them), and the modules that print (``render``, ``removal``,
``params``) look them up here at each call. Nothing here imports another module of the command, so that they
can all import it without a circle."""

from __future__ import annotations

from rich.console import Console

__all__ = ["console", "stderr_console"]

console = Console()
stderr_console = Console(stderr=True)
