"""A job's failure is explained by what really failed: the job's own set-up, or the task."""

from __future__ import annotations

import sys
import subprocess
from pathlib import Path

import pytest
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


HALF = '''
from pathlib import Path
import b2batch

class Half(b2batch.Task):
    def output(self):
        yield self.add_to_output("written.txt")
        yield self.add_to_output("forgotten.txt")

    def run(self):
        Path(self.get_output_file_name("written.txt")).write_text("x")

if __name__ == "__main__":
    b2batch.set_setting("output_wait_timeout", 60)
    b2batch.process(Half(), batch=True, batch_system="local")
'''


def test_a_local_job_without_all_its_outputs_fails_at_once_naming_the_missing_one(tmp_path: Path) -> None:
    import time

    (tmp_path / "half.py").write_text(HALF)
    started = time.monotonic()
    done = subprocess.run([sys.executable, "half.py"], cwd=tmp_path, env=clean_env(), capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 1
    assert time.monotonic() - started < 40, "it waited output_wait_timeout on the local file system"
    assert "its job ended without writing the outputs it declares: " in done.stderr, done.stderr[-3000:]
    line = next(l for l in done.stderr.splitlines() if "without writing the outputs" in l)
    assert "forgotten.txt" in line and "written.txt" not in line


SEPARATOR = '''
import b2batch

class Named(b2batch.Task):
    name = b2batch.Parameter()

    def output(self):
        yield self.add_to_output("out.txt")

    def run(self):
        pass

if __name__ == "__main__":
    b2batch.process(Named(name="a/b"), batch=True, batch_system="local")
'''


def test_a_task_that_cannot_be_scheduled_has_its_reason_in_the_summary(tmp_path: Path) -> None:
    (tmp_path / "separator.py").write_text(SEPARATOR)
    done = subprocess.run([sys.executable, "separator.py"], cwd=tmp_path, env=clean_env(), capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 1
    summary = done.stderr[done.stderr.index("===== b2batch summary ====="):]
    assert "its complete() raised OutputPathError" in summary and "a/b" in summary, summary


PLAIN = '''
import b2batch

class Nothing(b2batch.WrapperTask):
    pass

if __name__ == "__main__":
    print("the workflow ran")
    b2batch.process(Nothing())
'''


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_prints_the_flags_and_runs_nothing(tmp_path: Path, flag: str) -> None:
    (tmp_path / "plain.py").write_text(PLAIN)
    done = subprocess.run([sys.executable, "plain.py", flag], cwd=tmp_path, env=clean_env(), capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 0
    assert "--batch" in done.stdout and "--dry-run" in done.stdout
    assert not (tmp_path / "logs").exists()


@pytest.mark.parametrize(("typo", "meant"), [("--bacth", "--batch"), ("--dryrun", "--dry-run")])
def test_a_flag_close_to_one_of_b2batchs_stops_with_did_you_mean(tmp_path: Path, typo: str, meant: str) -> None:
    (tmp_path / "plain.py").write_text(PLAIN)
    done = subprocess.run([sys.executable, "plain.py", typo], cwd=tmp_path, env=clean_env(), capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 1
    assert f"unknown flag {typo!r}. Did you mean {meant!r}?" in done.stderr
    assert "summary" not in done.stderr  # nothing ran
