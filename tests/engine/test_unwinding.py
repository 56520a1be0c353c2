"""A cancelled task unwinds once: a second SIGTERM during its clean-up does not cut the clean-up short.

A CI run saw a temporary output left behind by an LSF job cancelled mid-task: the unit got SIGTERM from its
worker twice (the steering process's cancel mark, and the batch system's kill passed on), and the second
SystemExit struck inside on_temporary_files's clean-up."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

UNIT = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from b2batch.engine.unwinding import unwind_on_sigterm

    folder = Path(sys.argv[1])
    unwind_on_sigterm()
    try:
        (folder / "running").touch()
        time.sleep(60)
    finally:
        (folder / "cleaning").touch()
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:  # a clean-up of many small steps, as discard() is
            time.sleep(0.01)
        (folder / "cleaned").touch()
""")


def _wait(path: Path) -> None:
    deadline = time.monotonic() + 30
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.02)


def test_a_second_sigterm_does_not_cut_the_clean_up_short(tmp_path: Path) -> None:
    unit = subprocess.Popen([sys.executable, "-c", UNIT, str(tmp_path)])
    try:
        _wait(tmp_path / "running")
        unit.send_signal(signal.SIGTERM)
        _wait(tmp_path / "cleaning")
        unit.send_signal(signal.SIGTERM)
        unit.send_signal(signal.SIGTERM)
        assert unit.wait(timeout=30) == 128 + signal.SIGTERM
    finally:
        unit.kill()
    assert (tmp_path / "cleaned").exists()
