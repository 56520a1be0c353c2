"""A job's failure is explained by what really failed: the job's own set-up, or the task."""

from __future__ import annotations

import sys
import subprocess
from pathlib import Path

from conftest import clean_env

SCRIPT = '''
import os
import b2batch

class Quits(b2batch.Task):
    def output(self):
        yield self.add_to_output("never.txt")

    def run(self):
        os._exit(3)

if __name__ == "__main__":
    b2batch.process(Quits(), batch=True, batch_system="local")
'''


def test_a_task_that_exits_with_3_is_not_taken_for_a_failed_set_up(tmp_path: Path) -> None:
    (tmp_path / "quits.py").write_text(SCRIPT)
    done = subprocess.run([sys.executable, "quits.py"], cwd=tmp_path, env=clean_env(), capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 1
    assert "exited with code 3." in done.stderr, done.stderr[-3000:]
    assert "could not set up its environment" not in done.stderr
