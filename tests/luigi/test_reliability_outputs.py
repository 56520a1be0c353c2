"""Two different tasks of one graph that declare the same output path: a warning in a local run, an error
before anything is submitted in a --batch run, where their jobs would write the file at the same time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import clean_env

SCRIPT = '''
import b2batch

class Simulate(b2batch.Task):
    seed = b2batch.IntParameter()

    def output(self):
        yield self.add_to_output("events.txt")  # results/seed=1/events.txt

    def run(self):
        with open(self.get_output_file_name("events.txt"), "w") as f:
            f.write(type(self).__name__)

class Reconstruct(Simulate):  # another family, the same parameters and file name: the same path
    pass

class Both(b2batch.WrapperTask):
    def requires(self):
        yield Simulate(seed=1)
        yield Reconstruct(seed=1)

if __name__ == "__main__":
    b2batch.process(Both(), batch_system="local")
'''


def run(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (folder / "clash.py").write_text(SCRIPT)
    return subprocess.run([sys.executable, "clash.py", *args], cwd=folder, env=clean_env(), capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)


def test_a_local_run_warns_about_two_tasks_declaring_one_output(tmp_path: Path) -> None:
    done = run(tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    path = tmp_path / "results" / "seed=1" / "events.txt"
    warnings = [line for line in done.stderr.splitlines() if "both declare the output" in line]
    assert len(warnings) == 1, done.stderr[-3000:]
    assert "Simulate(seed=1)" in warnings[0] and "Reconstruct(seed=1)" in warnings[0] and str(path) in warnings[0]


def test_a_batch_run_stops_before_submitting_two_tasks_declaring_one_output(tmp_path: Path) -> None:
    done = run(tmp_path, "--batch")
    assert done.returncode == 1
    assert "both declare the output" in done.stderr and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert not (tmp_path / "results" / "seed=1" / "events.txt").exists()
