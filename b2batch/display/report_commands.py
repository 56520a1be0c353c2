"""The ``report`` and ``history`` commands of the ``b2batch`` console script: the HTML report of an earlier
run, and the list of a workflow's runs, both from the JSON reports in its log folder."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from b2batch.display import history
from b2batch.display.charts import duration, hours

#: (name, one-line help, description) of the commands defined here.
COMMANDS = {
    "report": ("Write the HTML report of a run from its JSON report.",
               "Write the HTML report (one self-contained file: headline numbers, job timeline, queue-wait and "
               "run-time distributions, efficiency per family, failures with their logs) of a run from its JSON "
               "report, beside it, and print its path. Every --batch run writes one already; this makes one for "
               "an earlier run. PATH: a report (b2batch-run-*.report.json), a log folder (its newest report) or "
               "a workflow script (the newest report of its runs in its log_dir)."),
    "history": ("List earlier runs from their reports in the log folder.",
                "List the runs whose JSON reports (b2batch-run-*.report.json) are in a log folder, oldest "
                "first: when each started, how long it took, its tasks, how many failed, its jobs, CPU-hours "
                "and efficiency when its report has accounting, and its result. PATH: a workflow script (its "
                "runs, from the log_dir its settings.json gives) or a log folder (every run there); default: "
                "the log_dir of the current folder's settings."),
}


class NotFound(Exception):
    """What to say when there is nothing to read."""


def add_commands(commands: Any) -> None:
    """Add ``report`` and ``history`` to the ``b2batch`` console script's subparsers."""
    report = commands.add_parser("report", help=COMMANDS["report"][0], description=COMMANDS["report"][1])
    report.add_argument("path", metavar="PATH", help="REPORT.json, LOG_DIR or WORKFLOW.py")
    report.add_argument("-o", "--output", help="write the page here instead of beside the report")
    past = commands.add_parser("history", help=COMMANDS["history"][0], description=COMMANDS["history"][1])
    past.add_argument("path", metavar="PATH", nargs="?", help="WORKFLOW.py or LOG_DIR")
    past.add_argument("--json", action="store_true", help="print the runs as a JSON list")


def run_command(args: argparse.Namespace) -> int:
    """Run ``report`` or ``history``; the exit status (1 with one line on stderr when nothing is found)."""
    try:
        return _report(args) if args.command == "report" else _history(args)
    except NotFound as e:
        print(f"b2batch {args.command}: {e}", file=sys.stderr)
        return 1


def log_folder(path: str | None) -> tuple[Path, Path | None]:
    """(the log folder, the workflow script or None) that ``path`` names: a workflow script (its log_dir as
    its settings.json files give it), a folder, or nothing (the log_dir of the current folder's settings)."""
    from b2batch.jobscript import base_folder
    from b2batch.settings import get_setting

    if path is None:  # as a workflow started from here would see it
        return (Path.cwd() / get_setting("log_dir")).resolve(), None
    target = Path(path)
    if not target.exists():
        raise NotFound(f"no workflow script or log folder {path}")
    if target.is_dir():
        return target.resolve(), None
    if target.is_file() and target.suffix == ".py":
        from b2batch.command.console import in_workflow_folder

        script = target.resolve()
        with in_workflow_folder(script):
            return base_folder.resolve(get_setting("log_dir")), script
    raise NotFound(f"{path} is neither a workflow script (.py) nor a folder")


def monitor_target(argument: str | None) -> Path:
    """What ``b2batch monitor`` looks in: a live-state file, a log folder, or a workflow script's log_dir (as
    the workflow would resolve it from its own folder; default: the log_dir seen from here)."""
    from b2batch.jobscript import base_folder
    from b2batch.settings import get_setting

    if argument and not argument.endswith(".py"):
        return Path(argument).resolve()
    if argument:
        from b2batch.command.console import in_workflow_folder

        script = Path(argument).resolve()
        with in_workflow_folder(script):
            return base_folder.resolve(get_setting("log_dir")).resolve()
    with base_folder.base_dir_pinned(os.getcwd()):  # relative to here, not to the b2batch command's own folder
        return base_folder.resolve(get_setting("log_dir")).resolve()


def _report(args: argparse.Namespace) -> int:
    from b2batch.display.html import html_path, read_report, write_html

    source = Path(args.path)
    if source.is_file() and source.name.endswith(".json"):
        chosen = source.resolve()
    else:
        folder, script = log_folder(args.path)
        runs, _left_out = history.past_runs(folder, script) if folder.is_dir() else ([], 0)
        if not runs:
            raise NotFound(_nothing_in(folder, script))
        chosen = folder / runs[-1].report
    try:
        report = read_report(chosen)
    except (OSError, ValueError) as e:
        raise NotFound(str(e)) from None
    if args.output:
        target = Path(args.output)
        from b2batch.display.html import render

        target.write_text(render(report, chosen), encoding="utf-8")
    else:
        target = write_html(report, chosen)
        assert target == html_path(chosen)
    print(target)
    return 0


def _history(args: argparse.Namespace) -> int:
    folder, script = log_folder(args.path)
    runs, left_out = history.past_runs(folder, script) if folder.is_dir() else ([], 0)
    if not runs:
        raise NotFound(_nothing_in(folder, script, left_out))
    if args.json:
        print(json.dumps([r.as_dict() for r in runs], indent=1))
        return 0
    _table(runs, folder, several_scripts=script is None and len({r.script for r in runs}) > 1)
    return 0


def _nothing_in(folder: Path, script: Path | None, left_out: int = 0) -> str:
    if not folder.is_dir():
        where = f"no log folder {folder}"
    else:
        where = f"no run reports ({history.PATTERN}) " + (f"of {script} " if script else "") + f"in {folder}"
    hint = " (a --batch run with run_summary on writes one at its end"
    hint += "; if the script sets log_dir in its code, give that folder instead)" if script else ")"
    return where + (f"; {left_out} other report(s) there" if left_out else "") + hint


def _table(runs: list[history.PastRun], folder: Path, several_scripts: bool) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, pad_edge=False)
    columns = ["started", "took", "tasks", "done", "failed", "jobs"]
    has_cpu = any(r.cpu_hours is not None for r in runs)
    has_efficiency = any(r.cpu_efficiency is not None or r.memory_efficiency is not None for r in runs)
    columns += ["CPU-hours"] * has_cpu + ["CPU eff.", "memory eff."] * has_efficiency + ["result"]
    columns += ["script"] * several_scripts + ["report"]
    for name in columns:
        table.add_column(name, justify="left" if name in ("started", "result", "script", "report") else "right",
                         no_wrap=name != "script")
    for r in runs:
        cells = [r.started.replace("T", " "), duration(r.seconds), str(r.tasks), str(r.done), str(r.failed),
                 str(r.jobs)]
        if has_cpu:
            cells.append(hours(r.cpu_hours))
        if has_efficiency:
            cells += [_percent(r.cpu_efficiency), _percent(r.memory_efficiency)]
        cells.append(r.result)
        if several_scripts:
            cells.append(" ".join([os.path.basename(r.script or "?"), *r.argv]))
        cells.append(r.report)
        table.add_row(*cells)
    width = shutil.get_terminal_size().columns if sys.stdout.isatty() else 1000
    print(f"Runs in {folder}:")
    Console(width=width, soft_wrap=False, highlight=False).print(table)


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"
