"""What a farm shows: the lines per state while pilots run, and at the end the failed lines with their exit
codes and the ends of their logs."""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any, TextIO

from b2batch.farm.workdir import WorkDir


def shown(command: str, most: int = 300) -> str:
    """A line fit to print: control characters (NUL...) and bytes that are not UTF-8 escaped, cut after
    ``most`` characters (0: never)."""
    text = command.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    text = "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in text)
    if most and len(text) > most:
        text = f"{text[:most]}... ({len(command)} characters)"
    return text


def where(handler: Any, task_id: int) -> str:
    """A line as the user sees it: its task id, and its line number in the task list where the handler knows
    it (PyTaskFarmer-style handlers of users may not)."""
    numbers = getattr(handler, "line_numbers", None)
    path = getattr(handler, "path", None)
    if numbers and task_id < len(numbers) and path:
        return f"task {task_id} (line {numbers[task_id]} of {path})"
    return f"task {task_id}"


def exit_code_text(code: int | None) -> str:
    if code is None:
        return "exit code unknown"
    text = f"exit code {code}"
    if 128 < code < 160:
        try:
            text += f" (killed by {signal.Signals(code - 128).name})"
        except ValueError:
            pass
    elif code == 127:
        text += " (command not found)"
    elif code == 126:
        text += " (could not be run)"
    return text


def summary(workdir: WorkDir, out: TextIO | None = None, most: int = 20, tail: int = 5,
            handler: Any = None) -> str:
    """The end-of-run account: counts, then each failed line (id, command, exit code, log, end of its log)."""
    counts = workdir.counts()
    running = sum(len(ids) for ids in workdir.running().values())
    lines = [f"Farm {workdir.path}: {counts['finished']} finished, {counts['failed']} failed, "
             f"{counts['toprocess']} to process" + (f", {running} running elsewhere" if running else "")]
    failed = workdir.failed_lines()
    if failed:
        codes = workdir.read_exit_codes()
        lines.append(f"Failed lines ({len(failed)}):")
        for task_id, command in failed[:most]:
            lines.append(f"  {where(handler, task_id)}: {shown(command)}  [{exit_code_text(codes.get(task_id))}; log "
                         f"{workdir.log(task_id)}]")
            end = workdir.log_tail(task_id, tail)
            lines.extend(f"      | {line}" for line in end.splitlines())
        if len(failed) > most:
            lines.append(f"  ... and {len(failed) - most} more in {workdir.failed}")
    text = "\n".join(lines)
    print(text, file=out or sys.stdout, flush=True)
    return text


class FarmProgress:
    """Lines per state and pilots per state: redrawn in place on a terminal (rich), else a line at most every
    ``every`` seconds when something changed."""

    def __init__(self, workdir: WorkDir, total: int, out: TextIO | None = None, every: float = 5.0) -> None:
        self.workdir = workdir
        self.total = total
        self.out = out or sys.stdout
        self.every = every
        self.live: Any = None
        self.last_text = ""
        self.last_at = 0.0
        self.started = time.monotonic()
        if self.out.isatty() and not os.environ.get("B2BATCH_NO_LIVE"):
            from rich.console import Console
            from rich.live import Live

            self.live = Live(console=Console(file=self.out), refresh_per_second=4, transient=False)
            self.live.start()

    def state(self, pilots: dict[str, int]) -> dict[str, int]:
        counts = self.workdir.counts()
        done = counts["finished"] + counts["failed"]
        counts["running"] = max(0, self.total - done - counts["toprocess"])
        return {**counts, **{f"pilots {k}": v for k, v in pilots.items() if v}}

    def update(self, pilots: dict[str, int], force: bool = False) -> dict[str, int]:
        """Show the lines and pilots per state (and return them)."""
        state = self.state(pilots)
        if self.live is not None:
            from rich.table import Table

            table = Table(title=f"b2batch farm {self.workdir.path}", show_header=True)
            for key in state:
                table.add_column(key, justify="right")
            table.add_row(*(str(v) for v in state.values()))
            table.caption = f"{time.monotonic() - self.started:.0f} s"
            self.live.update(table)
            return state
        text = ", ".join(f"{k} {v}" for k, v in state.items())
        now = time.monotonic()
        if force or (text != self.last_text and now - self.last_at >= self.every):
            print(f"{time.strftime('%H:%M:%S')} lines: {text}", file=self.out, flush=True)
            self.last_text, self.last_at = text, now
        return state

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()
