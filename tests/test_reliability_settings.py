"""A task class attribute that looks like a misspelt setting is warned about, with the setting meant, in
every kind of run (not only in --batch runs, whose graph runner checks the task classes as it goes)."""

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


def test_a_misspelt_setting_on_a_task_class_is_warned_about_in_a_local_run(tmp_path: Path) -> None:
    (tmp_path / "typo.py").write_text(SCRIPT)
    done = subprocess.run([sys.executable, "typo.py"], cwd=tmp_path, env=clean_env(), capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-3000:]
    warnings = [line for line in done.stderr.splitlines() if "htcondor_setings" in line]
    assert warnings == ["WARNING: Task class Simulate: the attribute 'htcondor_setings' is not a setting b2batch "
                        "knows and is ignored as one. Did you mean 'htcondor_settings'?"], done.stderr[-3000:]
