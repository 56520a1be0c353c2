"""The flags b2batch adds to every workflow script's command line; the script's own flags are left to it."""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Iterable, Sequence
from types import FrameType

from b2batch.settings import active_profile

#: Public (``b2batch.PUBLIC_MODULES``): what code outside b2batch (the b2luigi shim, plugins) may import.
__all__ = ["B2LUIGI_FLAGS"]


#: Short forms of b2batch's flags (b2luigi's); a script whose own argparse has one keeps it.
SHORT = {"--yes": "-y"}

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
    ("--remove", {"nargs": "*", "metavar": "TASK",
                  "help": "Remove the outputs of the root tasks, or of every task of the named task classes, "
                          "then run."}),
    ("--remove-only", {"nargs": "*", "metavar": "TASK",
                       "help": "Remove the outputs as --remove does, and exit."}),
    ("--keep", {"nargs": "+", "metavar": "TASK", "help": "With --remove: keep the outputs of these task classes."}),
    ("--yes", {"action": "store_true", "help": "Do not ask before removing outputs (also -y)."}),
    ("--workers", {"type": int, "help": "How many tasks run (or jobs are in flight) at once."}),
    ("--retry-failed", {"action": "store_true",
                        "help": "Submit again the tasks held back after max_task_failures failures in earlier runs."}),
    ("--scheduler-host", {"help": "Host of a luigi central scheduler (luigid)."}),
    ("--scheduler-port", {"type": int, "help": "Port of the luigi central scheduler."}),
)


def parser(own_flags: Iterable[str] = ()) -> argparse.ArgumentParser:
    """b2batch's flags, without the short forms the script's own argparse has (``own_flags``)."""
    own = set(own_flags)
    p = argparse.ArgumentParser(
        add_help=False,
        allow_abbrev=False,  # a flag of the script such as --show is the script's, not --show-output
        description="Flags of b2batch, understood by every workflow script that calls b2batch.process().",
    )
    for flag, options in FLAGS:
        short = [SHORT[flag]] if flag in SHORT and SHORT[flag] not in own else []
        p.add_argument(flag, *short, default=None, **options)  # type: ignore[arg-type]
    return p


def parse(argv: Sequence[str], own_flags: Iterable[str] = (),
          ignore_unknown: bool | None = None) -> tuple[argparse.Namespace, list[str]]:
    """b2batch's flags from ``argv``, and the arguments left for the script.

    ``-h``/``--help`` prints the flags and exits. ``own_flags`` are the script's own flags (those its
    argparse took, see :func:`script_flags`): they stay the script's. Any other flag that is close to one of
    b2batch's (``--bacth``) stops the run with a "did you mean", so that a typo does not silently run the
    workflow in another way. The remaining unknown flags get one warning, unless ``ignore_unknown`` is true
    (b2luigi's ``ignore_additional_command_line_args``); when it is false they stop the run.
    """
    if active_profile() == "b2luigi":
        return parse_as_b2luigi(argv, ignore_unknown, own_flags)
    p = parser(own_flags)
    args, rest = p.parse_known_args(list(argv))
    if "-h" in rest or "--help" in rest:
        p.print_help()
        raise SystemExit(0)
    flags = [flag for flag, _options in FLAGS]
    own = set(own_flags)
    unknown = []
    for arg in rest:
        name = arg.split("=", 1)[0]
        if not name.startswith("-") or name == "-" or name in own or _is_number(name):
            continue
        close = difflib.get_close_matches(name, flags, n=1, cutoff=0.8) if name.startswith("--") else []
        if close:
            raise SystemExit(f"ERROR: unknown flag {name!r}. Did you mean {close[0]!r}? (python SCRIPT --help "
                             f"lists b2batch's flags.)")
        unknown.append(name)
    if rest and ignore_unknown is False:
        raise SystemExit(f"Unknown command-line arguments: {' '.join(rest)}")
    if unknown and ignore_unknown is None:
        print(f"WARNING: the flag(s) {', '.join(unknown)} are neither b2batch's nor taken by the script's "
              f"argparse; they are left to the script. (python SCRIPT --help lists b2batch's flags; "
              f"process(..., ignore_additional_command_line_args=True) silences this warning.)", file=sys.stderr)
    return args, rest


def _class_names(text: str) -> list[str]:
    """b2luigi's value of --remove, --remove-only and --keep: one class name, or several joined by commas."""
    return text.split(",") if "," in text else [text]


#: b2luigi 1.3's flags, in its order (its usage line and errors list them so); b2batch's own two follow,
#: left out of the usage line.
B2LUIGI_FLAGS: tuple[tuple[tuple[str, ...], dict[str, object]], ...] = (
    (("--show-output",), {"action": "store_true", "help": "List every task with its output files and exit."}),
    (("--test",), {"action": "store_true", "help": "Run here, one task at a time, output to the terminal."}),
    (("--batch",), {"action": "store_true", "help": "Run each task as a job on its batch system."}),
    (("--batch-runner",), {"action": "store_true", "help": "Run only the task of --task-id, here (the command "
                                                          "of b2luigi's executable wrapper)."}),
    (("--dry-run",), {"action": "store_true", "help": "List the tasks that would run."}),
    (("--scheduler-host",), {"default": "", "help": "Host of a luigi central scheduler (luigid)."}),
    (("--scheduler-port",), {"type": int, "default": 0, "help": "Port of the luigi central scheduler."}),
    (("--remove",), {"type": _class_names, "default": [], "help": "Remove the outputs of these task classes "
                                                                   "(comma-separated) and of their dependents."}),
    (("--remove-only",), {"type": _class_names, "default": [], "help": "Remove the outputs of these task "
                                                                        "classes only."}),
    (("--keep",), {"type": _class_names, "default": [], "help": "Keep the outputs of these task classes."}),
    (("-y", "--yes"), {"action": "store_true", "help": "Do not ask before removing outputs."}),
    (("--tui",), {"action": "store_true", "help": "Write the run's live state for 'b2batch monitor' "
                                                 "(b2luigi's progress TUI)."}),
    (("--task-id",), {"default": "", "help": "The id of the task --batch-runner runs."}),
    (("--batch-system",), {"help": argparse.SUPPRESS}),
    (("--workers",), {"type": int, "help": argparse.SUPPRESS}),
    (("--retry-failed",), {"action": "store_true", "help": argparse.SUPPRESS}),
)


def parse_as_b2luigi(argv: Sequence[str], ignore_unknown: bool | None,
                     own_flags: Iterable[str] = ()) -> tuple[argparse.Namespace, list[str]]:
    """The flags as b2luigi 1.3 reads them, for a workflow written against b2luigi: each of ``--remove``,
    ``--remove-only`` and ``--keep`` takes one value (class names joined by commas), and an argument that is
    none of its flags is argparse's error (usage, exit status 2) unless ``ignore_unknown``
    (``ignore_additional_command_line_args=True``) or the script's own argparse takes it (``own_flags``, see
    :func:`script_flags`; b2luigi would refuse those too). b2batch's ``--batch-system`` and ``--workers`` are
    understood too. The flags come back as :func:`parse` gives them (None: not given)."""
    p = argparse.ArgumentParser()
    for names, options in B2LUIGI_FLAGS:
        p.add_argument(*names, **options)  # type: ignore[arg-type]
    args, rest = p.parse_known_args(list(argv))
    own = set(own_flags)
    flags = [arg.split("=", 1)[0] for arg in rest if arg.startswith("-") and arg != "-" and not _is_number(arg)]
    the_scripts = bool(flags) and all(flag in own for flag in flags)
    if rest and not ignore_unknown and not the_scripts:
        p.error(f"unrecognized arguments: {' '.join(rest)}")
    if (args.test or args.dry_run) and (args.scheduler_host or args.scheduler_port):
        raise AttributeError("--test and --dry-run cannot be used with a central scheduler "
                             "(--scheduler-host/--scheduler-port): drop one of them.")
    if args.batch_runner and not args.task_id:
        raise AttributeError("--batch-runner runs one task of the graph: give its id with --task-id (the command "
                             "of b2luigi's executable wrapper has both).")
    others = args.scheduler_host or args.scheduler_port or args.batch or args.test
    if args.show_output and others:
        print("Ignoring all other parameters, as you have given the --show-output parameter.")
    for flag, given in (("--remove", args.remove), ("--remove-only", args.remove_only)):
        if given and (others or args.show_output):
            print(f"Ignoring all other parameters, as you have given the {flag} parameter.")
    return argparse.Namespace(
        batch=args.batch, batch_system=args.batch_system, test=args.test, dry_run=args.dry_run,
        show_output=args.show_output, remove=args.remove or None, remove_only=args.remove_only or None,
        keep=args.keep or None, yes=args.yes, workers=args.workers, batch_runner=args.batch_runner,
        task_id=args.task_id,
        scheduler_host=args.scheduler_host or None, scheduler_port=args.scheduler_port or None,
    ), rest


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def script_flags(frame: FrameType | None) -> set[str]:
    """The flags of the workflow script's own argparse: those of every ``ArgumentParser`` (and the
    destinations of every parsed ``Namespace``, as ``--name`` and ``--na-me``) in the namespaces of ``frame``
    and its callers, up to the ``__main__`` module."""
    found: set[str] = set()
    while frame is not None:
        for value in list(frame.f_locals.values()) + list(frame.f_globals.values()):
            for item in value if isinstance(value, tuple) else (value,):
                if isinstance(item, argparse.ArgumentParser):
                    for action in item._actions:
                        found.update(action.option_strings)
                elif isinstance(item, argparse.Namespace):
                    for dest in vars(item):
                        found.update({f"--{dest}", f"--{dest.replace('_', '-')}"})
        frame = frame.f_back
    return found
