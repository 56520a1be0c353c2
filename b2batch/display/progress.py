"""Live progress of a batch run: how many tasks are in each state, per task family and batch system.

In a terminal, a table refreshed in place (``rich``); otherwise one log line per change of the counts, at
most one every :data:`PLAIN_INTERVAL` seconds. Everything shown comes from the run's record
(:class:`~b2batch.engine.RunRecord`): the jobs' states, and the work a front-end expects to become jobs
("waiting" until it has one).
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections import Counter
from typing import Any, Self, TextIO

from b2batch.engine import JobRecord, RunRecord

logger = logging.getLogger(__name__)

#: The states of a task, in the order of the table's columns; "resubmitted" is a count of resubmissions.
STATES = ("waiting", "submitted", "queued", "running", "done", "failed", "cancelled")
COLUMNS = (*STATES, "resubmitted")
#: Column headers of the narrow table (a terminal too narrow for the full words, e.g. 80 columns).
SHORT = {"waiting": "wait", "submitted": "sub", "queued": "queue", "running": "run", "done": "done",
         "failed": "fail", "cancelled": "cancel", "resubmitted": "resub"}
#: Shortest time between two progress lines when stderr is not a terminal (seconds).
PLAIN_INTERVAL = 5.0

Key = tuple[str, str]  # (task family, batch system)


class Progress:
    """Counts of the run's tasks by family, batch system and state; shown live while the run lasts."""

    def __init__(self, run: RunRecord, stream: TextIO | None = None, interval: float = PLAIN_INTERVAL,
                 live: bool | None = None) -> None:
        self.run = run
        self.stream = stream
        self.interval = interval
        self.live = live
        self.started_at = time.time()
        self._lock = threading.Lock()
        self._changed = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._live: Any = None
        self._original_stderr: Any = None  # while the table is shown: the real stderr, and rich's proxy of it
        self._proxy: Any = None
        self._last_line = ""

    # --- what is counted -----------------------------------------------------------------------------

    def job_changed(self, record: JobRecord | None = None) -> None:
        """The watcher on the record: a job changed its state, or work is expected."""
        self._changed.set()

    def counts(self) -> dict[Key, Counter[str]]:
        """Tasks per state (and resubmissions) by (family, system)."""
        rows: dict[Key, Counter[str]] = {}
        records = list(self.run.jobs.values())
        for key in list(self.run.expected.values()):
            rows.setdefault(key, Counter())["waiting"] += 1
        for record in records:
            row = rows.setdefault((record.family, record.system), Counter())
            row[record.state if record.state in STATES else "waiting"] += 1
            row["resubmitted"] += len(record.resubmissions)
        for key, folded in list(self.run.folded.items()):  # ended jobs the record no longer keeps one by one
            row = rows.setdefault(key, Counter())
            for state, n in folded.states.items():
                row[state if state in STATES else "waiting"] += n
            row["resubmitted"] += folded.resubmissions
        return rows

    @staticmethod
    def totals(rows: dict[Key, Counter[str]]) -> Counter[str]:
        total: Counter[str] = Counter()
        for row in rows.values():
            total.update(row)
        return total

    # --- how it is shown ------------------------------------------------------------------------------

    def line(self) -> str:
        """One line: the totals, then each family's non-zero states."""
        rows = self.counts()
        total = self.totals(rows)
        tasks = sum(total[s] for s in STATES)
        parts = [f"{total[s]} {s}" for s in STATES if total[s]]
        text = f"{tasks} task(s): {', '.join(parts) or 'none yet'}"
        if total["resubmitted"]:
            text += f" ({total['resubmitted']} resubmission(s))"
        systems = {system for _, system in rows}
        details = []
        for (family, system), row in sorted(rows.items()):
            name = f"{family}@{system}" if len(systems) > 1 else family
            details.append(f"{name} " + " ".join(f"{row[s]} {s}" for s in STATES if row[s]))
        return text + (" | " + "; ".join(details) if details else "")

    def table(self, width: int | None = None) -> Any:
        """A rich Table: one row per (family, batch system), a row per system if there are several, the
        total. When the full table is wider than ``width`` (the terminal's), a narrow one: short column
        headers, no borders, the batch system in the title if there is one, family names wrapped (never cut)."""
        from rich import box
        from rich.table import Table

        rows = self.counts()
        total = self.totals(rows)
        systems = sorted({system for _, system in rows})
        elapsed = _duration(time.time() - self.started_at)
        title = f"{sum(total[s] for s in STATES)} task(s), {elapsed}"
        numbers = max((len(str(total[c])) for c in COLUMNS), default=1)
        full = (max([len("task family"), *(len(f) for f, _ in rows)]) + max([len("batch system"), *map(len, systems)])
                + sum(max(len(c), numbers) for c in COLUMNS) + 3 * (len(COLUMNS) + 2) + 1)
        narrow = width is not None and full > width
        one_system = narrow and len(systems) == 1
        if narrow:
            table = Table(title=f"b2batch{f' on {systems[0]}' if one_system else ''}: {title}", title_justify="left",
                          show_footer=True, box=box.SIMPLE_HEAD, padding=(0, 0), pad_edge=False)
        else:
            table = Table(title=f"b2batch: {title}", title_justify="left", show_footer=True)
        longest = max([0, *(len(f) for f, _ in rows)])
        table.add_column("task family", footer="total", overflow="fold", min_width=min(longest, 10) or None)
        if not one_system:
            table.add_column("system" if narrow else "batch system", no_wrap=True,
                             min_width=max([0, *map(len, systems)]) if narrow else None)
        styles = {"failed": "red", "done": "green", "running": "cyan", "cancelled": "magenta",
                  "resubmitted": "yellow"}
        for column in COLUMNS:
            header = SHORT[column] if narrow else column
            table.add_column(header, justify="right", style=styles.get(column), footer=str(total[column]),
                             no_wrap=True, min_width=max(len(header), numbers) + (1 if narrow else 0))
        for (family, system), row in sorted(rows.items()):
            table.add_row(family, *([] if one_system else [system]), *(_cell(row[c]) for c in COLUMNS))
        if len(systems) > 1:
            for system in systems:
                subtotal = self.totals({k: v for k, v in rows.items() if k[1] == system})
                table.add_row("all", system, *(_cell(subtotal[c]) for c in COLUMNS), style="italic")
        return table

    # --- start and stop -------------------------------------------------------------------------------

    def start(self) -> None:
        """Show the progress until :meth:`stop`."""
        self.started_at = time.time()
        self.run.watchers.append(self.job_changed)
        stream = self.stream or sys.stderr
        live = self.live if self.live is not None else _is_terminal(stream)
        if live:
            self._start_live(stream)
        else:
            self._thread = threading.Thread(target=self._plain_loop, name="b2batch-progress", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        if self.job_changed in self.run.watchers:
            self.run.watchers.remove(self.job_changed)
        self._stopping.set()
        self._changed.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        if self._live is not None:
            self._live.refresh()
            self._live.stop()
            self._restore_log_streams()
            self._live = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _plain_loop(self) -> None:
        """A line when the counts changed, then a pause: at most one line per interval."""
        while not self._stopping.is_set():
            self._changed.wait()
            self._changed.clear()
            self._emit()
            self._stopping.wait(self.interval)
        self._emit()

    def _emit(self) -> None:
        line = self.line()
        if line != self._last_line and not line.startswith("0 task(s)"):
            self._last_line = line
            logger.info("Progress [%s]: %s", _duration(time.time() - self.started_at), line)

    def _start_live(self, stream: TextIO) -> None:
        from rich.console import Console
        from rich.live import Live

        console = Console(file=stream)
        self._live = Live(console=console, get_renderable=lambda: self.table(console.width), refresh_per_second=2,
                          redirect_stdout=_isatty(sys.stdout), redirect_stderr=stream is sys.stderr)
        self._original_stderr = sys.stderr
        self._live.start()
        self._proxy = sys.stderr if sys.stderr is not self._original_stderr else None
        # Log handlers made before the table was shown write to the real stderr: send their lines through
        # rich's proxy, so that they print above the table, as print() does.
        if self._proxy is not None:
            for handler in _stream_handlers():
                if handler.stream is self._original_stderr:
                    handler.setStream(self._proxy)

    def _restore_log_streams(self) -> None:
        """Handlers that write to rich's proxy of stderr (those redirected, and those made while the table
        was shown, e.g. luigi's) write to the real stderr again."""
        if self._proxy is None:
            return
        for handler in _stream_handlers():
            if handler.stream is self._proxy:
                handler.setStream(self._original_stderr)
        self._proxy = None


def _cell(count: int) -> str:
    return str(count) if count else "·"


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _is_terminal(stream: TextIO) -> bool:
    """Whether a live display fits: a terminal that understands cursor movements."""
    if not _isatty(stream):
        return False  # (without importing rich: ~0.1 s of a Pool's or an Executor's start when not on a terminal)
    from rich.console import Console

    console = Console(file=stream)
    return console.is_terminal and not console.is_dumb_terminal


def _stream_handlers() -> list[logging.StreamHandler[Any]]:
    loggers = [logging.getLogger(), *(logging.getLogger(name) for name in list(logging.root.manager.loggerDict))]
    found = []
    for each in loggers:
        for handler in getattr(each, "handlers", []):
            if type(handler) is logging.StreamHandler and handler not in found:
                found.append(handler)
    return found
