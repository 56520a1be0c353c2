"""``b2luigi.cli.arguments.get_cli_arguments``: the flags of a workflow script (``--batch``, ``--test``,
``--dry-run``, ``--show-output``, ``--remove`` ...) as b2luigi 1.3's argparse reads them from ``sys.argv``.
The flags are b2batch's table of b2luigi's (``b2batch.luigi_frontend.flags.B2LUIGI_FLAGS``)."""

from __future__ import annotations

import argparse

from b2batch.luigi_frontend.flags import B2LUIGI_FLAGS

__all__ = ["get_cli_arguments"]


def get_cli_arguments(ignore_additional_command_line_args: bool = False) -> argparse.Namespace:
    """The parsed flags; an argument that is none of them is argparse's error (status 2) unless
    ``ignore_additional_command_line_args``. ``--test``/``--dry-run`` with a central scheduler, and
    ``--batch-runner`` without ``--task-id``, raise ``AttributeError``."""
    parser = argparse.ArgumentParser()
    for names, options in B2LUIGI_FLAGS:
        parser.add_argument(*names, **options)  # type: ignore[arg-type]
    if ignore_additional_command_line_args:
        args, _rest = parser.parse_known_args()
    else:
        args = parser.parse_args()
    central = args.scheduler_host or args.scheduler_port
    if (args.test or args.dry_run) and central:
        raise AttributeError("Can not test while using a central scheduler!")
    if args.batch_runner and not args.task_id:
        raise AttributeError("A batch runner should always have a fully qualified task id.")
    others = central or args.batch or args.test
    if args.show_output and others:
        print("Ignoring all other parameters, as you have given the --show-output parameter.")
    for flag, given in (("--remove", args.remove), ("--remove-only", args.remove_only)):
        if given and (others or args.show_output):
            print(f"Ignoring all other parameters, as you have given the {flag} parameter.")
    return args
