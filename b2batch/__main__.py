"""The ``b2batch`` console script."""

from __future__ import annotations

DESCRIPTION = """Run luigi workflows as batch jobs (HTCondor, LSF, Slurm, SGE or local processes) and look after
them: follow and cancel a workflow's jobs, look at its tasks, run a task list as a farm, and rehearse with
emulated HTCondor and LSF tools. 'b2batch COMMAND --help' tells more about each command."""

#: (name, one-line help, description) of the commands defined here.
COMMANDS = {
    "emulate": ("Run a command with emulated scheduler tools on PATH.",
                "Run COMMAND with emulated HTCondor (condor_submit, condor_q, condor_history, condor_rm) or LSF "
                "(bsub, bjobs, bkill) tools first on PATH. They really run the jobs on this machine, so a "
                "workflow can be rehearsed with --batch without a cluster; their state is kept in "
                "$B2BATCH_EMULATOR_DIR. Exits with COMMAND's exit status (127: not found, 126: not executable). "
                "Example: b2batch emulate htcondor -- python workflow.py --batch"),
    "settings": ("Print settings.json.example (or --markdown).",
                 "Print every setting with its default and meaning as a settings.json example to copy, or as "
                 "a Markdown table (--markdown). --profile b2luigi: the defaults a workflow that imports b2luigi "
                 "gets (b2luigi 1.3's)."),
    "run": ("Run a workflow script with its arguments (like python SCRIPT ARGS).",
            "Run a workflow script with its arguments with this Python, as 'python SCRIPT ARGS' would; exits "
            "with the script's exit status."),
    "status": ("List the jobs of a workflow and their states.",
               "List the jobs of the workflow's current tasks (the parameters its last run used) from the "
               "job folders in its task_file_dir, with each job's batch system, id and state (asking the "
               "batch system about jobs that have not ended), and the counts per state. --all lists every "
               "job folder, those of earlier parameter sets too."),
    "monitor": ("Follow where a run stands, from any terminal.",
                "Show the newest live run of a workflow (its log_dir), of a log folder or of one "
                "b2batch-live-*.json file: tasks per family and state, running jobs with their ages and nodes, "
                "failures, joblib's nested calls per level; l/e show the selected task's stdout/stderr, p pages "
                "it with $PAGER, q quits. Reads only the files the run writes; a run that ended says so."),
    "cancel": ("Cancel the queued and running jobs of a workflow.",
               "Cancel the workflow's queued and running jobs: one cancel command per batch system; local "
               "jobs by stopping their steering process, which kills its jobs. Asks first unless --yes."),
}


import argparse
import shlex
import sys
from pathlib import Path
from typing import Any


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``b2batch`` command."""
    parser = argparse.ArgumentParser(prog="b2batch", description=DESCRIPTION)
    commands = parser.add_subparsers(dest="command", required=True)
    if (sys.argv[1:] if argv is None else argv)[:1] == ["farm"]:
        return _farm_alone(parser, commands, argv)
    emulate = commands.add_parser("emulate", help=COMMANDS["emulate"][0], description=COMMANDS["emulate"][1])
    emulate.add_argument("system", choices=["htcondor", "lsf"], help="the batch system to emulate")
    emulate.add_argument("cmd", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    settings = commands.add_parser("settings", help=COMMANDS["settings"][0], description=COMMANDS["settings"][1])
    settings.add_argument("--markdown", action="store_true", help="a Markdown table instead of JSON")
    settings.add_argument("--profile", choices=["b2batch", "b2luigi"], default="b2batch",
                          help="the defaults of workflows written for b2batch (default) or against b2luigi")
    run = commands.add_parser("run", help=COMMANDS["run"][0], description=COMMANDS["run"][1])
    run.add_argument("script", help="the workflow script")
    run.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    status = commands.add_parser("status", help=COMMANDS["status"][0], description=COMMANDS["status"][1])
    cancel = commands.add_parser("cancel", help=COMMANDS["cancel"][0], description=COMMANDS["cancel"][1])
    cancel.add_argument("--yes", action="store_true", help="Do not ask first.")
    status.add_argument("--json", action="store_true", help="Print the jobs as JSON.")
    status.add_argument("--all", action="store_true",
                        help="List every job folder in task_file_dir, those of earlier parameters too.")
    monitor = commands.add_parser("monitor", help=COMMANDS["monitor"][0], description=COMMANDS["monitor"][1])
    monitor.add_argument("target", nargs="?", help="WORKFLOW.py, LOG_DIR or a b2batch-live-*.json file "
                                                   "(default: the log_dir seen from here)")
    monitor.add_argument("--once", action="store_true", help="print the view once and exit (as when not a terminal)")
    for sub in (status, cancel):
        sub.add_argument("--task-file-dir", help="the workflow's task_file_dir, if its code sets it")
        sub.add_argument("script", help="the workflow script")
    status.add_argument("args", nargs=argparse.REMAINDER,
                        help="the script's own arguments, which choose its tasks (default: those of its last "
                             "batch run)")
    from b2batch.luigi_frontend import inspection
    from b2batch.farm import command_line as farm_cli

    from b2batch.luigi_frontend import retry_command

    inspection.add_commands(commands)
    farm_cli.add_subcommand(commands)
    retry_command.add_command(commands)
    from b2batch.display import report_commands as display_commands

    display_commands.add_commands(commands)
    args = parser.parse_args(argv)
    if args.command == "farm":
        return farm_cli.run(args, commands.choices["farm"])
    if args.command == retry_command.NAME:
        return retry_command.run(args)
    if args.command in display_commands.COMMANDS:
        return display_commands.run_command(args)
    if args.command in inspection.COMMANDS:
        return inspection.run_command(args)
    if args.command == "monitor":
        from b2batch.display import live_view as live_monitor

        return live_monitor.main(display_commands.monitor_target(args.target), once=args.once)
    if args.command in ("run", "status", "cancel"):
        from b2batch.command import console

        if args.command == "run":
            return console.run(args.script, args.args)
        if args.command == "status":
            _status_flags_after_the_script(status, args)
            current = None if args.all else _current_job_folders(args.script, args.args)
            return console.status(args.script, args.task_file_dir, as_json=args.json, current=current)
        return console.cancel(args.script, yes=args.yes, override=args.task_file_dir)
    if args.command == "settings":
        from b2batch.settings import reference, use_profile

        use_profile(args.profile)
        sys.stdout.write(reference.settings_reference_markdown() if args.markdown else reference.example_settings())
        return 0
    if args.command == "emulate":
        from b2batch.emulators import run_with_emulator

        cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
        if not cmd:
            parser.error("emulate needs a command after --")
        return run_with_emulator(args.system, cmd)
    return 2


def _farm_alone(parser: argparse.ArgumentParser, commands: Any, argv: list[str] | None) -> int:
    """``b2batch farm``: the farm's command line alone, without the other commands' imports (luigi, rich: ~0.3-1 s
    of every farm's and farm pilot's start)."""
    from b2batch.farm import command_line as farm_cli

    farm_cli.add_subcommand(commands)
    return farm_cli.run(parser.parse_args(argv), commands.choices["farm"])


def _status_flags_after_the_script(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """``b2batch status SCRIPT --json``: status's own flags may follow the script; the rest (or all after
    ``--``) are the script's arguments."""
    ours = argparse.ArgumentParser(add_help=False)
    ours.add_argument("--json", action="store_true")
    ours.add_argument("--all", action="store_true")
    ours.add_argument("--task-file-dir")
    cut = args.args.index("--") if "--" in args.args else len(args.args)
    found, rest = ours.parse_known_args(args.args[:cut])
    args.json, args.all = args.json or found.json, args.all or found.all
    args.task_file_dir = found.task_file_dir or args.task_file_dir
    args.args = rest + args.args[cut + 1:]


def _current_job_folders(script: str, script_args: list[str]) -> set[Path] | None:
    """The job folders of the workflow's tasks, made with ``script_args`` (default: the arguments of its
    last batch run); None (list every job) if the script cannot be loaded, said on stderr."""
    from b2batch.command import console
    from b2batch.luigi_frontend import inspection

    if not script_args:
        script_args = console.last_arguments(Path(script).resolve()) or []
    try:
        with inspection.loaded(script, script_args) as flow:
            return inspection.job_folders(flow.tasks)
    except (Exception, SystemExit) as e:  # noqa: BLE001 - the user's script may raise anything
        print(f"b2batch status: could not load {shlex.join([script, *script_args])} to find its tasks "
              f"({type(e).__name__}: {e}); listing every job folder", file=sys.stderr)
        return None


if __name__ == "__main__":
    sys.exit(main())
