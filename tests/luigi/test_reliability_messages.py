"""Failures are explained for the task they concern: one element of a job array that cannot be submitted
fails alone, named as itself, while the other elements run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import clean_env

SCRIPT = '''
import b2batch

class Work(b2batch.Task):
    n = b2batch.IntParameter()

    @property
    def htcondor_settings(self):
        return {"no such thing": 1} if self.n == 1 else {}

    def output(self):
        yield self.add_to_output("w.txt")

    def run(self):
        with open(self.get_output_file_name("w.txt"), "w") as f:
            f.write("done")

class All(b2batch.WrapperTask):
    def requires(self):
        for n in range(3):
            yield Work(n=n)

if __name__ == "__main__":
    b2batch.process(All(), batch=True, workers=3)
'''


def test_an_array_element_that_cannot_be_submitted_is_named_as_itself(tmp_path: Path) -> None:
    (tmp_path / "work.py").write_text(SCRIPT)
    (tmp_path / "settings.json").write_text(json.dumps({"batch_system": "htcondor", "submission_window": 1}))
    done = subprocess.run([sys.executable, "-m", "b2batch", "emulate", "htcondor", "--", sys.executable, "work.py"],
                          cwd=tmp_path, env=clean_env(B2BATCH_EMULATOR_DIR=str(tmp_path / "emulator")),
                          capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    assert done.returncode == 1
    summary = done.stderr[done.stderr.index("===== b2batch summary ====="):]
    failed = [line.strip() for line in summary.splitlines() if "could not be submitted" in line]
    assert failed == ["Task Work(n=1) could not be submitted to htcondor: Task Work(n=1): 'no such thing' in "
                      "htcondor_settings is not a submit command name."], summary
    assert sorted(p.parent.name for p in (tmp_path / "results").rglob("w.txt")) == ["n=0", "n=2"]


def test_a_task_stopped_by_a_signal_is_explained_in_one_line_not_by_a_traceback() -> None:
    from b2batch.luigi_frontend.task_on_node import _without_signal_traceback

    killed = "Runtime error:\nTraceback (most recent call last):\n  File \"x.py\", line 1\n    time.sleep(1)\nSystemExit: 143\n"
    assert _without_signal_traceback(killed) == ("stopped by SIGTERM while it ran (cancelled, or over a limit of the "
                                                 "batch system)")
    own = "Runtime error:\nTraceback (most recent call last):\nSystemExit: 2\n"  # the task's own sys.exit(2)
    assert _without_signal_traceback(own) == own and _without_signal_traceback(None) is None
