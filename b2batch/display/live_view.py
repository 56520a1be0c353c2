"""``b2batch monitor [WORKFLOW.py | LOG_DIR | FILE]``: where a run stands, from any terminal that sees its log
folder. It reads only the run's live-state file (:mod:`b2batch.engine.livestate`) and the logs it names:
counts per task family, batch system and state, the running jobs with their ages and nodes, the failures,
joblib's nested calls per level, and a task's log on a key. Drawn with rich (a dependency already; a
read-only view with a few keys needs no widget toolkit, and starts in a fraction of textual's time).

Keys: up/down (or k/j) select a running or failed task, ``l`` its stdout, ``e`` its stderr (the end of it,
in the monitor; ``b`` or Esc back), ``p`` the whole log in ``$PAGER`` (default ``less``), ``q`` quits.
"""

from __future__ import annotations

import contextlib
import os
import select
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from b2batch.display import livefiles
from b2batch.display.livefiles import LiveRun
from b2batch.engine.livestate import STATES

SHORT = {"waiting": "wait", "submitted": "sub", "queued": "queue", "running": "run", "done": "done",
         "failed": "fail", "cancelled": "cancel", "resubmitted": "resub"}
STYLES = {"failed": "red", "done": "green", "running": "cyan", "cancelled": "magenta", "resubmitted": "yellow"}
KEYS = "↑/↓ select  l stdout  e stderr  p pager  q quit"


class Monitor:
    """The view of the newest live run under ``target`` (a log folder or a live-state file)."""

    def __init__(self, target: Path, console: Console | None = None) -> None:
        self.target = target
        self.console = console or Console()
        self.runs: list[LiveRun] = []
        self.run: LiveRun | None = None
        self.selected = 0
        self.log: tuple[str, str] | None = None  # (which, path) while a log is shown
        self.nodes: dict[str, str] = {}
        self._scanned = 0.0

    # --- reading ------------------------------------------------------------------------------------

    def refresh(self, now: float | None = None) -> None:
        """Read the run's file again; look for runs again when there is none, it ended, or it is a joblib
        call (nested calls come and go), at most every 2 s."""
        now = now or time.monotonic()
        if self.run is not None:
            self.run.reload()
        again = self.run is None or not self.run.live or "joblib" in self.run.state
        if again and now - self._scanned >= 2.0:
            self._scanned = now
            if self.target.is_file():
                self.runs = livefiles.read_all([self.target])
            else:
                self.runs = livefiles.read_all(livefiles.candidates(self.target))
            chosen = livefiles.choose(self.runs)
            if chosen is not None and (self.run is None or chosen.path != self.run.path):
                self.run, self.selected, self.log = chosen, 0, None

    def items(self) -> list[tuple[str, dict[str, Any]]]:
        """The tasks one can select: the running ones, then the failures (newest first)."""
        if self.run is None:
            return []
        return ([("running", job) for job in self.run.state.get("running", [])]
                + [("failed", job) for job in reversed(self.run.state.get("failures", []))])

    # --- keys ---------------------------------------------------------------------------------------

    def key(self, key: str) -> bool:
        """Act on ``key``; False when the monitor should quit."""
        items = self.items()
        if key == "q":
            return False
        if key in ("b", "esc"):
            self.log = None
        elif key in ("up", "k"):
            self.selected = max(0, self.selected - 1)
        elif key in ("down", "j"):
            self.selected = min(max(0, len(items) - 1), self.selected + 1)
        elif key in ("l", "e") and items:
            job = items[min(self.selected, len(items) - 1)][1]
            which = "stdout" if key == "l" else "stderr"
            self.log = (which, job[which])
        return True

    def selected_log(self) -> str | None:
        if self.log is not None:
            return self.log[1]
        items = self.items()
        return items[min(self.selected, len(items) - 1)][1]["stdout"] if items else None

    # --- the view -----------------------------------------------------------------------------------

    def view(self) -> Any:
        height = self.console.height
        if self.run is None:
            return Text(f"b2batch monitor: no run in {self.target} yet (looking for its live state, "
                        f"b2batch-live-*.json, every 2 s)\n\n{KEYS}")
        parts: list[Any] = [self._header()]
        if self.log is not None:
            which, path = self.log
            parts.append(Text(f"{which}: {path}", style="bold reverse"))
            parts += [Text(line, no_wrap=True, overflow="ellipsis")
                      for line in livefiles.tail(path, max(3, height - 5))]
            parts.append(Text("b or Esc: back   p: the whole log in the pager   q: quit", style="dim"))
            return Group(*parts)
        farm = self.run.state.get("farm")
        if farm:
            parts.append(Text("Farm lines: " + ", ".join(f"{n} {what}" for what, n in farm.items()
                                                         if not what.startswith("pilots ")), style="bold"))
        parts.append(self._counts())
        for kind, counts in sorted((self.run.state.get("worker_jobs") or {}).items()):
            running = counts.get("running") or []
            parts.append(Text(f"{kind.capitalize()} jobs: {counts.get('submitted', 0)} submitted, "
                              f"{counts.get('started', 0)} started, {counts.get('never_started', 0)} never started; "
                              f"{len(running)} running" + (f" ({', '.join(running[:8])}"
                                                           f"{', ...' if len(running) > 8 else ''})" if running else "")))
        levels = livefiles.joblib_levels(self.runs, self.run)
        if levels and (len(levels) > 1 or levels[0]["calls"] > 1):
            parts.append(self._levels(levels))
        room = max(4, height - sum(_lines(p) for p in parts) - 4)
        items = self.items()
        running = [job for kind, job in items if kind == "running"]
        failures = [job for kind, job in items if kind == "failed"]
        shown_running = running[:max(2, room // 2)] if failures else running[:room]
        parts.append(self._jobs("running", running, shown_running, 0))
        if failures:
            parts.append(self._jobs("failed", failures, failures[:max(2, room - len(shown_running))],
                                    len(running)))
        parts.append(Text(KEYS, style="dim"))
        return Group(*parts)

    def _header(self) -> Text:
        assert self.run is not None
        state = self.run.state
        command = " ".join([Path(state.get("script") or "").name, *map(str, state.get("argv") or [])]).strip()
        elapsed = (state.get("ended_at") or time.time()) - self.run.started_at
        text = Text(f"b2batch monitor: {state.get('front_end', '?')} {command}", style="bold")
        text.append(f"  on {state.get('host')}, pid {state.get('pid')}, {_duration(elapsed)}\n")
        if self.run.ended:
            text.append(f"Run ENDED at {time.strftime('%H:%M:%S', time.localtime(state['ended_at']))}: "
                        f"{state.get('result') or 'ended'}", style="bold green" if state.get("result") == "success"
                        else "bold red")
        elif self.run.gone():
            text.append(f"Run ENDED: its steering process ({state.get('pid')} on {state.get('host')}) is gone, "
                        f"last heard of at {time.strftime('%H:%M:%S', time.localtime(state['updated_at']))}",
                        style="bold red")
        else:
            text.append(f"running; updated {time.strftime('%H:%M:%S', time.localtime(state['updated_at']))}",
                        style="cyan")
        text.append(f"\n{self.run.path}", style="dim")
        return text

    def _counts(self) -> Table:
        assert self.run is not None
        counts: dict[str, dict[str, dict[str, int]]] = self.run.state.get("counts", {})
        columns = (*STATES, "resubmitted")
        systems = sorted({system for family in counts.values() for system in family})
        one = len(systems) == 1  # then named in the title: the table fits 80 columns
        table = Table(title=f"Tasks on {systems[0]}" if one else "Tasks", title_justify="left", box=box.SIMPLE_HEAD,
                      padding=(0, 0), pad_edge=False, show_footer=True)
        table.add_column("task family", footer="total", overflow="fold", min_width=12)
        if not one:
            table.add_column("system", no_wrap=True)
        totals = dict.fromkeys(columns, 0)
        for family in sorted(counts):
            for system in sorted(counts[family]):
                row = counts[family][system]
                for column in columns:
                    totals[column] += row.get(column, 0)
        for column in columns:
            table.add_column(SHORT[column], justify="right", style=STYLES.get(column), no_wrap=True,
                             footer=str(totals[column]), min_width=len(SHORT[column]) + 2)
        for family in sorted(counts):
            for system in sorted(counts[family]):
                row = counts[family][system]
                table.add_row(family, *([] if one else [system]),
                              *(str(row.get(c, 0)) if row.get(c) else "·" for c in columns))
        return table

    def _levels(self, levels: list[dict[str, Any]]) -> Table:
        table = Table(title="joblib calls per level", title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1),
                      pad_edge=False)
        for name in ("level", "calls", "live", "done", "running", "queued", "failed", "total", "throttle"):
            table.add_column(name, justify="right", style=STYLES.get(name))
        for row in levels:
            table.add_row(*(str(row[name]) if row[name] is not None else "-"
                            for name in ("level", "calls", "live", "done", "running", "queued", "failed", "total",
                                         "throttle")))
        return table

    def _jobs(self, kind: str, jobs: list[dict[str, Any]], shown: list[dict[str, Any]], first: int) -> Table:
        title = f"{kind.capitalize()} ({len(jobs)}{f', {len(shown)} shown' if len(shown) < len(jobs) else ''})"
        table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False,
                      expand=True)
        table.add_column("task", overflow="ellipsis", no_wrap=True, ratio=3)
        table.add_column("job", overflow="ellipsis", no_wrap=True, max_width=14)
        if kind == "running":
            table.add_column("node", overflow="ellipsis", no_wrap=True, max_width=16)
            table.add_column("age", justify="right", no_wrap=True)
        else:
            table.add_column("why", overflow="ellipsis", no_wrap=True, ratio=2)
        now = time.time()
        for i, job in enumerate(shown):
            style = "reverse" if first + i == self.selected else None
            where = str(job.get("job_id") or "-")
            if kind == "running":
                node = livefiles.node_of(job["stdout"], self.nodes) if job.get("stdout") else ""
                age = _duration(now - job["started_at"]) if job.get("started_at") else "?"
                table.add_row(job["task"], where, node or "?", age, style=style)
            else:
                table.add_row(job["task"], where, job.get("reason") or "", style=style)
        return table

    # --- the terminal -------------------------------------------------------------------------------

    def loop(self) -> int:
        """Show the view until ``q``."""
        from rich.live import Live

        self.refresh()
        with _keys() as read, Live(console=self.console, screen=True, auto_refresh=False,
                                   get_renderable=self.view) as live:
            drawn = 0.0
            while True:
                key = read(0.25)
                if key == "p":
                    path = self.selected_log()
                    if path:
                        live.stop()
                        _page(path)
                        live.start()
                        drawn = 0.0
                elif key is not None and not self.key(key):
                    return 0
                now = time.monotonic()
                if key is not None or now - drawn >= 1.0:
                    self.refresh(now)
                    live.refresh()
                    drawn = now


def _page(path: str) -> None:
    pager = os.environ.get("PAGER") or "less"
    with _cooked():
        subprocess.run([*shlex.split(pager), path], check=False)


@contextlib.contextmanager
def _cooked() -> Iterator[None]:
    """The terminal as the pager expects it (line mode, echo), back to key mode after."""
    if not sys.stdin.isatty():
        yield
        return
    import termios

    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    try:
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


@contextlib.contextmanager
def _keys() -> Iterator[Any]:
    """A function that waits up to a time for one key press: "q", "up", "down", "esc", ... or None."""
    import termios
    import tty

    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    tty.setcbreak(fd)

    def read(timeout: float) -> str | None:
        ready, _, _ = select.select([fd], [], [], timeout)
        if not ready:
            return None
        data = os.read(fd, 16)
        if data in (b"\x1b[A", b"\x1bOA"):
            return "up"
        if data in (b"\x1b[B", b"\x1bOB"):
            return "down"
        if data == b"\x1b":
            return "esc"
        return data[:1].decode(errors="replace")

    try:
        yield read
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def _lines(renderable: Any) -> int:
    if isinstance(renderable, Table):
        return renderable.row_count + 5
    return 3


def _duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def main(target: Path, once: bool = False) -> int:
    """The ``b2batch monitor`` command on ``target`` (a live-state file or a log folder: the command line's
    :func:`b2batch.display.report_commands.monitor_target`)."""
    if not target.exists():
        print(f"b2batch monitor: {target} does not exist: give a workflow script, its log folder (log_dir) or a "
              f"b2batch-live-*.json file", file=sys.stderr)
        return 2
    console = Console()
    monitor = Monitor(target, console)
    if once or not (sys.stdin.isatty() and console.is_terminal):
        monitor.refresh()
        console.print(monitor.view())
        return 0 if monitor.run is not None else 1
    return monitor.loop()
