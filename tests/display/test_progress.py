"""Live progress of a batch run: counting from the run record (jobs, and the work the graph runner expects
to become jobs), the table, the
rate-limited plain lines, and both in real runs (stderr a pipe, and stderr a pseudo-terminal)."""

from __future__ import annotations

import fcntl
import io
import itertools
import logging
import os
import pty
import re
import shlex
import shutil
import struct
import subprocess
import sys
import termios
import time
from collections import Counter
from pathlib import Path
from typing import Any, ClassVar

import luigi.scheduler
import luigi.worker
import pytest
from conftest import clean_env, wait_for
from rich.console import Console

import b2batch
from b2batch.display.progress import Progress
from b2batch.engine import Run, RunRecord
from b2batch.luigi_frontend.jobs import RunContext, TaskJobs
from b2batch.luigi_frontend.graph_runner import GraphRunner
from b2batch.settings.runconfig import run_config

BATCH = ("--batch", "--batch-system", "local")


# --- counting ------------------------------------------------------------------------------------------------

class Checked(b2batch.Task):
    """A task that counts how often its completeness is checked."""

    checks: ClassVar[Counter[str]] = Counter()
    n = b2batch.IntParameter()
    exists = b2batch.BoolParameter(default=False)

    def complete(self) -> bool:
        Checked.checks[self.task_id] += 1
        return self.exists

    def run(self) -> None:
        """Never run in these tests."""


class Data(b2batch.ExternalTask):
    def output(self):
        return b2batch.LocalTarget("/nonexistent/b2batch/data")


class Other(b2batch.Task):
    batch_system = "htcondor"

    def complete(self) -> bool:
        return False

    def run(self) -> None:
        """Never run in these tests."""


class Root(b2batch.WrapperTask):
    def requires(self):
        yield from (Checked(n=n) for n in range(3))
        yield Checked(n=9, exists=True)
        yield Data()
        yield Other()


def test_waiting_tasks_come_from_the_graph_walk_with_no_more_completeness_checks_than_luigis() -> None:
    b2batch.set_setting("batch_system", "slurm")
    Checked.checks.clear()
    with luigi.worker.Worker(scheduler=luigi.scheduler.Scheduler(), worker_processes=1) as worker:
        worker.add(Root())
    without_display = Counter(Checked.checks)  # luigi's own walk of the graph
    Checked.checks.clear()
    run = Run(config=run_config())  # the run's batch_system: the setting above
    progress = Progress(run.record, live=False, interval=60)
    progress.start()
    try:
        GraphRunner(TaskJobs(run, RunContext()), record=run.record).add(Root())
    finally:
        progress.stop()
    with_display = Counter(Checked.checks)
    assert progress.counts() == {("Checked", "slurm"): Counter(waiting=3), ("Other", "htcondor"): Counter(waiting=1)}
    assert with_display == without_display  # the display adds no completeness check
    assert progress.line() == "4 task(s): 4 waiting | Checked@slurm 3 waiting; Other@htcondor 1 waiting"


class Step:
    """What RunRecord.update reads of an engine job: its key, family, parameters, system, id and files (an ended
    job's usage.json beside its exit-code file: none here)."""

    stdout = stderr = Path("/logs")
    exit_code = Path("/nonexistent/exit_code")

    log_folder_text = "/logs"

    def __init__(self, family: str, n: int, system: str = "local") -> None:
        self.family, self.key = family, f"{family}_{n}"
        self.params = {"n": str(n)}
        self.system = system
        self.job_id: str | None = None
        self.files = self
        self.task = self  # the tests below name steps by it

    @property
    def task_id(self) -> str:
        return self.key

    def stderr_tail(self, lines: int) -> str:
        return "the end"


def test_counts_follow_the_run_record_and_render_as_a_table() -> None:
    run = RunRecord()
    progress = Progress(run, live=False, interval=60)
    steps = [Step("Sim", n) for n in range(4)] + [Step("Fit", 0, system="slurm")]
    for step in steps:
        step.job_id = f"{step.task.task_id}.1"
        run.update(step, "submitted")
    run.update(steps[0], "running")
    run.update(steps[1], "queued")
    run.update(steps[2], "running")
    run.update(steps[2], "done")
    run.update(steps[3], "running")
    run.update(steps[3], "resubmitted", "node failure")  # waits to be submitted again
    run.update(steps[4], "failed", "broken")
    counts = progress.counts()
    assert counts[("Sim", "local")] == Counter(running=1, queued=1, done=1, waiting=1, resubmitted=1)
    assert counts[("Fit", "slurm")] == Counter(failed=1)
    assert progress.line() == ("5 task(s): 1 waiting, 1 queued, 1 running, 1 done, 1 failed (1 resubmission(s)) | "
                               "Fit@slurm 1 failed; Sim@local 1 waiting 1 queued 1 running 1 done")

    console = Console(file=io.StringIO(), width=160, record=True, color_system=None)
    console.print(progress.table())
    text = console.export_text()
    assert re.search(r"b2batch: 5 task\(s\), 0:00:0\d", text)
    header = next(line for line in text.splitlines() if "task family" in line)
    assert re.findall(r"[a-z][a-z ]*[a-z]", header) == ["task family", "batch system", "waiting", "submitted",
                                                        "queued", "running", "done", "failed", "cancelled",
                                                        "resubmitted"]
    cells = {line.split()[1]: re.findall(r"[\d·]+", line) for line in text.splitlines()
             if re.match(r"^\W+(Sim|Fit|all|total)\b", line)}
    assert cells["Sim"] == ["1", "·", "1", "1", "1", "·", "·", "1"]
    assert cells["Fit"] == ["·", "·", "·", "·", "·", "1", "·", "·"]
    assert cells["total"] == ["1", "0", "1", "1", "1", "1", "0", "1"]  # the footer
    assert sum(1 for line in text.splitlines() if re.match(r"^\W+all\b", line)) == 2  # a row per system


def test_a_record_that_keeps_the_last_ended_jobs_folds_older_ones_into_the_counts() -> None:
    """A run of a million units must not keep a record per unit (issue 28): with keep_ended=N the record holds
    the last N ended jobs; the progress counts and the monitor's live state still count every job."""
    from b2batch.engine.livestate import Tally

    run = RunRecord(keep_ended=10)
    tally = Tally(run)
    run.listeners.append(tally.changed)
    run.forgetters.append(tally.forget)
    progress = Progress(run, live=False, interval=60)
    steps = [Step("Unit", n) for n in range(1000)]
    for n, step in enumerate(steps):
        step.job_id = str(n)
        run.update(step, "submitted")
        run.update(step, "running")
        if n == 500:
            run.update(step, "resubmitted", "lost")
            run.update(step, "running")
        run.update(step, "failed" if n % 100 == 7 else "done", "broken" if n % 100 == 7 else "")
    assert len(run.jobs) == 10 and set(run.jobs) == {f"Unit_{n}" for n in range(990, 1000)}
    assert progress.counts() == {("Unit", "local"): Counter(done=990, failed=10, resubmitted=1)}
    assert run.folded[("Unit", "local")].jobs == 990
    assert len(tally._seen) == 10 and not tally._running  # the live state's index lets them go too
    assert tally.snapshot()["counts"]["Unit"]["local"] == {"done": 990, "failed": 10, "resubmitted": 1}
    late = Tally(run)  # a monitor that starts later counts the folded ones as well
    assert late.snapshot()["counts"]["Unit"]["local"] == {"done": 990, "failed": 10, "resubmitted": 1}
    # A job resubmitted before its turn to be let go stays until it ends again.
    again = RunRecord(keep_ended=1)
    first, second = Step("A", 1), Step("A", 2)
    again.update(first, "failed", "x")
    again.update(first, "resubmitted", "again")
    again.update(second, "done")  # first's key leaves the window while first waits again: it is kept
    assert set(again.jobs) == {"A_1", "A_2"}
    again.update(first, "done")
    assert set(again.jobs) == {"A_1"} and again.folded[("A", "local")].states == Counter(done=1)


def test_plain_lines_come_on_changes_and_at_most_one_per_interval(caplog: Any) -> None:
    caplog.set_level(logging.INFO, logger="b2batch.display.progress")
    run = RunRecord()
    progress = Progress(run, live=False, interval=0.3)
    progress.start()
    steps = [Step("Sim", n) for n in range(60)]
    started = time.monotonic()
    for step in steps:  # a change every 20 ms for 1.2 s
        step.job_id = "1"
        run.update(step, "submitted")
        time.sleep(0.02)
    elapsed = time.monotonic() - started
    time.sleep(0.5)  # no change: no line
    progress.stop()
    lines = [r for r in caplog.records if r.name == "b2batch.display.progress"]
    assert 2 <= len(lines) <= elapsed / 0.3 + 2, [r.getMessage() for r in lines]
    gaps = [b.created - a.created for a, b in itertools.pairwise(lines)]
    assert all(gap >= 0.29 for gap in gaps), gaps
    assert lines[-1].getMessage().endswith("60 task(s): 60 submitted | Sim 60 submitted")
    assert len({r.getMessage().split("]: ")[1] for r in lines}) == len(lines)  # only changes


# --- in real runs ---------------------------------------------------------------------------------------------

def test_progress_lines_when_stderr_is_not_a_terminal(workflow) -> None:
    flow = workflow("experience.py")
    run = flow.run(*BATCH, "--count", "2", "--sleep", "1")
    assert run.returncode == 0, run.stderr
    lines = re.findall(r"^INFO: Progress \[(\d+):(\d\d):(\d\d)\]: (.*)$", run.stderr, re.M)
    assert lines, run.stderr
    assert lines[-1][3] == "3 task(s): 3 done | Part 2 done; Total 1 done"
    seconds = [int(h) * 3600 + int(m) * 60 + int(s) for h, m, s, _ in lines]
    assert all(b - a >= 4 for a, b in itertools.pairwise(seconds[:-1]))  # the last one comes at the end
    assert "\x1b[" not in run.stderr  # no terminal control sequences in a log


def run_in_terminal(command: list[str], cwd: Path, columns: int = 150) -> tuple[int, str]:
    """Run ``command`` with stdin, stdout and stderr on a pseudo-terminal; its exit status and output."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = clean_env(TERM="xterm-256color")
    env.pop("COLUMNS", None)
    env.pop("NO_COLOR", None)
    process = subprocess.Popen(command, cwd=cwd, env=env, stdin=slave, stdout=slave, stderr=slave,
                               start_new_session=True)
    os.close(slave)
    output = b""
    try:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the terminal's other side is closed
                break
            if not data:
                break
            output += data
        code = process.wait(timeout=120)
    finally:
        os.close(master)
        if process.poll() is None:
            process.kill()
    return code, output.decode(errors="replace")


def test_progress_table_in_a_terminal(workflow) -> None:
    flow = workflow("experience.py")
    code, output = run_in_terminal([sys.executable, str(flow.script), *BATCH, "--count", "2", "--sleep", "1"],
                                   flow.folder)
    assert code == 0, output
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", output)
    assert "\x1b[1A" in output and "\x1b[2K" in output  # the table is redrawn in place
    assert re.search(r"┃ +task family +┃ +batch system +┃ +waiting +┃ +submitted +┃ +queued +┃ +running +┃ +done +┃ "
                     r"+failed +┃ +cancelled +┃ +resubmitted +┃", plain), plain
    assert plain.count("┃ task family") >= 2, plain  # drawn more than once
    final = plain[plain.rindex("┃ task family"):plain.index("===== b2batch summary")]
    assert re.search(r"│ Part +│ local +│ +· │ +· │ +· │ +· │ +2 │ +· │ +· │ +· │", final), final
    assert re.search(r"│ total +│ +│ +0 │ +0 │ +0 │ +0 │ +3 │ +0 │ +0 │ +0 │", final), final
    assert "INFO: Job " in plain and "submitted task Part(n=0) to local" in plain  # log lines above the table
    assert "Progress [" not in plain  # no plain lines in a terminal
    assert plain.index("===== b2batch summary") > plain.rindex("┃")  # the summary after the last table


# --- at 80 columns ---------------------------------------------------------------------------------------------

def render(progress: Progress, width: int) -> str:
    console = Console(file=io.StringIO(), width=width, record=True, color_system=None)
    console.print(progress.table(width))
    return console.export_text()


def test_the_table_at_80_columns_wraps_names_and_never_cuts_them() -> None:
    families = ("ReconstructionOfSimulatedEvents", "AnalyseAllTheEventsOfTheWholeExperiment")
    for systems in (("htcondor", "htcondor"), ("htcondor", "local")):
        run = RunRecord()
        progress = Progress(run, live=False)
        steps = [Step(families[0], n, system=systems[0]) for n in range(3)] + [Step(families[1], 0, systems[1])]
        for step in steps:
            step.job_id = f"{step.task.task_id}.1"
            run.update(step, "submitted")
        run.update(steps[0], "running")
        run.update(steps[1], "cancelled", "cancelled when the run was interrupted")
        for width in (80,):
            text = render(progress, width)
            lines = text.splitlines()
            assert "…" not in text and max(map(len, lines)) <= width, text
            header = next(line for line in lines if " wait " in line)
            assert header.split()[-8:] == ["wait", "sub", "queue", "run", "done", "fail", "cancel", "resub"], text
            one_system = systems[0] == systems[1]
            assert ("system" in header) is not one_system, text  # one system: named in the title
            assert (f"b2batch on htcondor: 4 task(s)" in text) is one_system, text
            first_cells = "".join(line[:line.index(" ", 1)].strip() for line in lines[lines.index(header) + 2:])
            for family in families:  # each name whole when its wrapped pieces are put together
                assert family in first_cells, text
            total = next(line for line in lines if line.strip().startswith("total")).split()
            assert total[1:] == ["0", "2", "0", "1", "0", "0", "1", "0"], text
        wide = render(progress, 200)
        assert "┃ task family" in wide and " cancelled " in wide  # room enough: the full table
        assert render(progress, 80) != wide


def tmux(socket: str, *args: str, env: dict[str, str] | None = None) -> str:
    return subprocess.run(["tmux", "-L", socket, "-f", "/dev/null", *args], check=True, capture_output=True,
                          text=True, env=env).stdout


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_a_real_batch_run_in_an_80_column_tmux_pane_and_ctrl_c(workflow, tmp_path: Path) -> None:
    """A real terminal of 80 columns: the live table fits, a Ctrl-C shows the cancelled tasks as cancelled,
    and the rerun says they were cancelled (not that they failed with exit code 143)."""
    flow = workflow("narrow.py")
    socket = f"b2batch-test-{os.getpid()}"
    env = clean_env(TERM="xterm-256color")
    env.pop("COLUMNS", None)
    env.pop("LINES", None)
    tmux(socket, "new-session", "-d", "-x", "80", "-y", "24", "-c", str(flow.folder), "bash --norc --noprofile",
         env=env)

    def screen(joined: bool = False) -> str:  # joined: lines the terminal wrapped put together again
        return tmux(socket, "capture-pane", "-p", "-S", "-2000", *(["-J"] if joined else []))

    try:
        tmux(socket, "send-keys", f"{shlex.join(flow.command(*BATCH, '--sleep', '60'))}; echo EXIT=$?", "Enter")
        wait_for(lambda: any(int(q) + int(r) == 3 for q, r in re.findall(r"total +1 +0 +(\d+) +(\d+) +0 ", screen())),
                 60, "three queued or running tasks")
        during = screen()
        tmux(socket, "send-keys", "C-c")
        wait_for(lambda: re.search(r"^EXIT=\d+", screen(), re.M), 60, "the run to end")
        after = screen()
        tmux(socket, "send-keys", f"{shlex.join(flow.command(*BATCH))}; echo EXIT2=$?", "Enter")
        wait_for(lambda: re.search(r"^EXIT2=\d+", screen(), re.M), 120, "the rerun to end")
        rerun = re.sub(r"\s+", " ", screen(joined=True).split("EXIT=130", 1)[1])  # rich wraps its log lines too
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], check=False, capture_output=True)
    for text in (during, after):
        assert "…" not in text, text
        assert re.search(r"task family +wait +sub +queue +run +done +fail +cancel +resub", text), text
    assert "b2batch on local:" in during and "ReconstructionOfSimulated" in during
    before_summary = after[:after.index("===== b2batch summary")]
    final = before_summary[before_summary.rindex("task family"):]
    assert re.search(r"^ total +1 +0 +0 +0 +0 +0 +3 +0 *$", final, re.M), final  # Analyse waits, 3 cancelled
    assert "EXIT=130" in after and "Result: stopped by SIGINT." in after, after[-2000:]
    assert "failed with exit code 143" not in rerun, rerun
    # Those that ran were killed (exit code 143) and say they were cancelled; one still queued says nothing.
    earlier = re.findall(r"its earlier local job \S+ (.*?); submitting it again", rerun)
    assert earlier and set(earlier) == {"was cancelled when the run was interrupted"}, rerun
    assert "EXIT2=0" in rerun, rerun
