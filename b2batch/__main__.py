"""The ``b2batch`` console script."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``b2batch`` command."""
    import argparse

    parser = argparse.ArgumentParser(prog="b2batch", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    emulate = commands.add_parser("emulate", help="Run a command with emulated scheduler tools on PATH.")
    emulate.add_argument("system", choices=["htcondor", "lsf"])
    emulate.add_argument("cmd", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    settings = commands.add_parser("settings", help="Print settings.json.example (or --markdown).")
    settings.add_argument("--markdown", action="store_true")
    run = commands.add_parser("run", help="Run a workflow script with its arguments (like python SCRIPT ARGS).")
    run.add_argument("script")
    run.add_argument("args", nargs=argparse.REMAINDER)
    status = commands.add_parser("status", help="List the jobs of a workflow and their states.")
    cancel = commands.add_parser("cancel", help="Cancel the queued and running jobs of a workflow.")
    cancel.add_argument("--yes", action="store_true", help="Do not ask first.")
    status.add_argument("--json", action="store_true", help="Print the jobs as JSON.")
    for sub in (status, cancel):
        sub.add_argument("script", help="the workflow script")
        sub.add_argument("--task-file-dir", help="the workflow's task_file_dir, if its code sets it")
    from b2batch import inspection
    from b2batch.farm import cli as farm_cli

    inspection.add_commands(commands)
    farm_cli.add_subcommand(commands)
    args = parser.parse_args(argv)
    if args.command == "farm":
        return farm_cli.run(args, commands.choices["farm"])
    if args.command in inspection.COMMANDS:
        return inspection.run_command(args)
    if args.command in ("run", "status", "cancel"):
        from b2batch import console

        if args.command == "run":
            return console.run(args.script, args.args)
        if args.command == "status":
            return console.status(args.script, args.task_file_dir, as_json=args.json)
        return console.cancel(args.script, yes=args.yes, override=args.task_file_dir)
    if args.command == "settings":
        from b2batch.settings import example_settings, settings_reference_markdown

        sys.stdout.write(settings_reference_markdown() if args.markdown else example_settings())
        return 0
    if args.command == "emulate":
        from b2batch.emulators import run_with_emulator

        cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
        if not cmd:
            parser.error("emulate needs a command after --")
        return run_with_emulator(args.system, cmd)
    return 2


if __name__ == "__main__":
    sys.exit(main())
