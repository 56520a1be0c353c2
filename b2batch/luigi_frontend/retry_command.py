"""``b2batch retry [WORKFLOW.py] [TASK ...]``: forget the failures counted for a workflow's tasks, so that poison
tasks (``max_task_failures``) are submitted again by its next run."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from b2batch.luigi_frontend import poison

NAME = "retry"
HELP = "Let a workflow's next run submit its poison tasks again."
DESCRIPTION = ("Forget the failures counted across runs for the tasks of a workflow (in its task_file_dir), so "
               "that its next run submits again the tasks it held back after max_task_failures failures. TASK "
               "filters by task family or task id, shell patterns allowed (Simulate, 'Simulate_seed_3*'); "
               "without one every task's count is reset. The workflow's own --retry-failed does the same for "
               "the tasks of one run.")


def add_command(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``retry`` to the ``b2batch`` command's subcommands."""
    retry = commands.add_parser(NAME, help=HELP, description=DESCRIPTION)
    retry.add_argument("--task-file-dir", help="the workflow's task_file_dir, if its code sets it")
    retry.add_argument("targets", nargs="*", metavar="[WORKFLOW.py] [TASK]",
                       help="the workflow script (default: the settings seen from here), then task filters")


def run(args: argparse.Namespace) -> int:
    """Reset the counts; print what was reset. Exit status 0, or 2 when the named script does not exist."""
    from b2batch.command import console
    from b2batch.jobscript import base_folder
    from b2batch.settings import get_setting

    targets = list(args.targets)
    script = None
    if targets and targets[0].endswith(".py"):
        script = Path(targets.pop(0)).resolve()
        if not script.is_file():
            print(f"b2batch retry: no workflow script {script}", file=sys.stderr)
            return 2
    folder = (console.task_file_dir(script, args.task_file_dir) if script is not None
              else base_folder.resolve(args.task_file_dir or get_setting("task_file_dir")))
    reset = poison.reset(folder, targets or None)
    which = f" matching {', '.join(targets)}" if targets else ""
    if not reset:
        print(f"No failures are counted for tasks{which} in {folder}.")
        return 0
    print(f"Forgot the failures of {len(reset)} task(s){which}; the next run submits them again:")
    for task_id, failures in reset:
        print(f"  {task_id}: {failures.count} failure(s), last: {failures.last_error}")
    return 0
