"""A task class attribute that looks like a misspelt setting stops every kind of run, with the setting meant
(not only --batch runs, whose graph runner checks the task classes as it goes)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import clean_env

SCRIPT = '''
import b2batch

class Simulate(b2batch.Task):
    htcondor_setings = {"request_cpus": 2}

    def output(self):
        yield self.add_to_output("events.txt")

    def run(self):
        with open(self.get_output_file_name("events.txt"), "w") as f:
            f.write("events")

if __name__ == "__main__":
    b2batch.process([Simulate()])
'''


def test_a_misspelt_setting_on_a_task_class_stops_a_local_run(tmp_path: Path) -> None:
    (tmp_path / "typo.py").write_text(SCRIPT)
    done = subprocess.run([sys.executable, "typo.py"], cwd=tmp_path, env=clean_env(), capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 1, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if "htcondor_setings" in line]
    assert len(lines) == 1 and lines[0].startswith(
        "ERROR: Task class Simulate: the attribute 'htcondor_setings' is not a setting b2batch knows. Did you mean "
        "'htcondor_settings'?"), done.stderr[-3000:]
    assert not (tmp_path / "results").exists()
