"""The flags b2batch adds to every workflow script's command line; the script's own flags are left to it."""

from __future__ import annotations

import argparse
from collections.abc import Sequence


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        add_help=False,
        allow_abbrev=False,  # a flag of the script such as --show is the script's, not --show-output
        description="Flags of b2batch, understood by every workflow script that calls b2batch.process().",
    )
    p.add_argument("--batch", action="store_true", default=None,
                   help="Run each task as a job on its batch system (setting batch_system).")
    p.add_argument("--batch-system", default=None,
                   help="Use this batch system for every task that sets none of its own.")
    p.add_argument("--test", action="store_true", default=None,
                   help="Run locally in this process, one task at a time, output to the terminal.")
    p.add_argument("--dry-run", action="store_true", default=None,
                   help="List the tasks that would run; exit 1 if any would, 0 if all is complete.")
    p.add_argument("--show-output", action="store_true", default=None,
                   help="List every task with its output files, complete or not, and exit.")
    p.add_argument("--remove", action="store_true", default=None,
                   help="Remove the outputs of the given tasks, then run.")
    p.add_argument("--remove-only", action="store_true", default=None,
                   help="Remove the outputs of the given tasks and exit.")
    p.add_argument("--yes", action="store_true", default=None,
                   help="Do not ask before removing outputs.")
    p.add_argument("--workers", type=int, default=None,
                   help="How many tasks run (or jobs are in flight) at once.")
    p.add_argument("--scheduler-host", default=None, help="Host of a luigi central scheduler (luigid).")
    p.add_argument("--scheduler-port", type=int, default=None, help="Port of the luigi central scheduler.")
    return p


def parse(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    """b2batch's flags from ``argv``, and the arguments left for the script."""
    args, rest = parser().parse_known_args(list(argv))
    return args, rest


def confirm(question: str) -> bool:
    """Ask a yes/no question on the terminal; no answer (or no stdin) is no."""
    try:
        answer = input(f"{question} [y/N] ")
    except EOFError:
        answer = ""
    return answer.strip().lower() in ("y", "yes")
