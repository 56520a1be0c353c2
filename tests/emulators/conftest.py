"""Fixtures of the emulator tests: a private state directory per test, and ways to call the tools.

* ``emu`` (autouse): ``B2BATCH_EMULATOR_DIR`` points into ``tmp_path``, two slots; on teardown every
  runner and job process the test left behind is killed.
* ``emu.call(tool, *args, stdin=...)``: runs a tool in-process (fast), returns rc/out/err.
* ``emu.run(tool, *args, stdin=...)``: runs it as a real process through the shim entry script.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from b2batch.emulators import slots, job_table
from b2batch.emulators.__main__ import main as emulator_main

ENTRY = str(Path(slots.__file__).with_name("_entry.py"))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: end-to-end runs that wait for real jobs")


@dataclass
class Result:
    """What a tool printed and returned."""

    rc: int
    out: str
    err: str


class Emu:
    """Helpers bound to one test's emulator state directory."""

    def __init__(self, root: Path, work: Path) -> None:
        self.root = root
        self.work = work

    def call(self, tool: str, *args: str, stdin: str | None = None) -> Result:
        """Run a tool in this process (as ``python -m b2batch.emulators TOOL ARGS`` would)."""
        out, err = io.StringIO(), io.StringIO()
        old_stdin = sys.stdin
        sys.stdin = io.StringIO(stdin or "")
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                rc = emulator_main([tool, *args])
        finally:
            sys.stdin = old_stdin
        return Result(rc, out.getvalue(), err.getvalue())

    def run(self, tool: str, *args: str, stdin: str | None = None, timeout: float = 60) -> Result:
        """Run a tool as its own process, like a shim on PATH does."""
        done = subprocess.run(
            [sys.executable, ENTRY, tool, *args],
            input=stdin or "",
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=os.getcwd(),
            check=False,
        )
        return Result(done.returncode, done.stdout, done.stderr)

    def table(self, system: str) -> dict[str, Any]:
        """The raw state document of a system."""
        path = self.root / system / "state.json"
        return json.loads(path.read_text()) if path.exists() else {"jobs": {}}

    def condor_q(self, *args: str, history: bool = False) -> list[dict[str, Any]]:
        """condor_q / condor_history -json, parsed (empty stdout -> [])."""
        result = self.call("condor_history" if history else "condor_q", "-json", *args)
        assert result.rc == 0, result
        return json.loads(result.out) if result.out else []

    def bjobs(self, *args: str) -> dict[str, Any]:
        """bjobs -json, parsed."""
        result = self.call("bjobs", "-json", *args)
        document: dict[str, Any] = json.loads(result.out)
        return document

    def submit(self, text: str, *args: str) -> int:
        """condor_submit a description; returns the cluster id."""
        result = self.call("condor_submit", "-terse", *args, "-", stdin=text)
        assert result.rc == 0, result
        return int(result.out.split(".")[0])

    def bsub(self, *args: str, stdin: str | None = None) -> int:
        """bsub; returns the job id."""
        result = self.call("bsub", *args, stdin=stdin)
        assert result.rc == 0, result
        return int(result.out.split("<")[1].split(">")[0])

    def cleanup(self) -> None:
        """Kill every runner and job process recorded in this state directory."""
        for system in job_table.SYSTEMS:
            for job in self.table(system)["jobs"].values():
                for ref in (job.get("runner"), job.get("proc")):
                    slots.kill_group(ref, signal.SIGKILL)


def gone(pid: int) -> bool:
    """Whether the process ``pid`` (a job's) ended: no such process, or a zombie (also when it ends between the
    look-up and the status: CI BU)."""
    import psutil

    try:
        return psutil.Process(pid).status() == "zombie"
    except psutil.NoSuchProcess:
        return True


def wait_for(predicate: Callable[[], Any], timeout: float = 20.0, interval: float = 0.1) -> Any:
    """Poll until ``predicate()`` is truthy; returns its value or fails the test."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {timeout} s: {predicate}")
        time.sleep(interval)


@pytest.fixture(autouse=True)
def emu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Emu]:
    root = tmp_path / "emulator-state"
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv(job_table.ENV_DIR, str(root))
    monkeypatch.setenv(job_table.ENV_SLOTS, "2")
    monkeypatch.delenv(job_table.ENV_KEEP, raising=False)
    helper = Emu(root, work)
    yield helper
    helper.cleanup()
