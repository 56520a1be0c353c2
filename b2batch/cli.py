"""The flags b2batch adds to every workflow script's command line; the script's own flags are left to it."""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Sequence


#: b2batch's flags: the names and argparse's keyword arguments of each.
FLAGS: tuple[tuple[str, dict[str, object]], ...] = (
    ("--batch", {"action": "store_true",
                 "help": "Run each task as a job on its batch system (setting batch_system)."}),
    ("--batch-system", {"help": "Use this batch system for every task that sets none of its own."}),
    ("--test", {"action": "store_true",
                "help": "Run locally in this process, one task at a time, output to the terminal."}),
    ("--dry-run", {"action": "store_true",
                   "help": "List the tasks that would run; exit 1 if any would, 0 if all is complete."}),
    ("--show-output", {"action": "store_true",
                       "help": "List every task with its output files, complete or not, and exit."}),
    ("--remove", {"action": "store_true", "help": "Remove the outputs of the given tasks, then run."}),
    ("--remove-only", {"action": "store_true", "help": "Remove the outputs of the given tasks and exit."}),
    ("--yes", {"action": "store_true", "help": "Do not ask before removing outputs."}),
    ("--workers", {"type": int, "help": "How many tasks run (or jobs are in flight) at once."}),
    ("--scheduler-host", {"help": "Host of a luigi central scheduler (luigid)."}),
    ("--scheduler-port", {"type": int, "help": "Port of the luigi central scheduler."}),
)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        add_help=False,
        allow_abbrev=False,  # a flag of the script such as --show is the script's, not --show-output
        description="Flags of b2batch, understood by every workflow script that calls b2batch.process().",
    )
    for flag, options in FLAGS:
        p.add_argument(flag, default=None, **options)  # type: ignore[arg-type]
    return p


def parse(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    """b2batch's flags from ``argv``, and the arguments left for the script. ``-h``/``--help`` prints the
    flags and exits; a flag that is not b2batch's but close to one of them (``--bacth``) stops the run with
    a "did you mean", so that a typo does not silently run the workflow in another way."""
    p = parser()
    args, rest = p.parse_known_args(list(argv))
    if "-h" in rest or "--help" in rest:
        p.print_help()
        raise SystemExit(0)
    flags = [flag for flag, _options in FLAGS]
    for arg in rest:
        name = arg.split("=", 1)[0]
        if name.startswith("--") and name not in flags:
            close = difflib.get_close_matches(name, flags, n=1, cutoff=0.8)
            if close:
                raise SystemExit(f"ERROR: unknown flag {name!r}. Did you mean {close[0]!r}? (python SCRIPT --help "
                                 f"lists b2batch's flags.)")
    return args, rest


def confirm(question: str) -> bool:
    """Ask a yes/no question on the terminal; no answer (or no stdin) is no."""
    try:
        answer = input(f"{question} [y/N] ")
    except EOFError:
        answer = ""
    return answer.strip().lower() in ("y", "yes")
