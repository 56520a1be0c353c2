"""A misspelt setting never reaches a cluster (issue 31, 1): a name close to a known setting, in settings.json,
in set_setting() or as a task class attribute, stops the run before anything is submitted, with one line that
names the place, the name and the setting meant; other unknown names get one short warning line each; and
``auto`` says which batch system it chose, and why, before the first submission.

The scripts run with a recording ``sbatch`` first on PATH: the batch system ``auto`` would pick it, so a typo
that let the run go on would be seen submitting there."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import luigi
import pytest

import b2batch
from b2batch import settings, systems
from b2batch.errors import SettingError
from b2batch.luigi_frontend.graph_checks import check_task_class
from conftest import clean_env

SCRIPT = '''
import b2batch

class Simulate(b2batch.Task):
    seed = b2batch.IntParameter()
{attributes}
    def output(self):
        yield self.add_to_output("events.txt")

    def run(self):
        with open(self.get_output_file_name("events.txt"), "w") as f:
            f.write("events")

if __name__ == "__main__":
{before}    b2batch.process([Simulate(seed=i) for i in range(3)])
'''

FAKE_SBATCH = '''#!/bin/sh
echo "$@" >> "{marker}"
echo "Submitted batch job 4242"
'''


def script(folder: Path, attributes: str = "", before: str = "", **settings_json: object) -> Path:
    (folder / "wf.py").write_text(SCRIPT.format(attributes=attributes, before=before))
    if settings_json:
        import json

        (folder / "settings.json").write_text(json.dumps(settings_json))
    return folder / "wf.py"


def run(folder: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    """Run wf.py with a recording sbatch first on PATH; the result and the file sbatch calls go to."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(exist_ok=True)
    marker = folder / "sbatch-calls"
    (bin_dir / "sbatch").write_text(FAKE_SBATCH.format(marker=marker))
    (bin_dir / "sbatch").chmod(0o755)
    env = clean_env(PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    done = subprocess.run([sys.executable, "wf.py", *args], cwd=folder, env=env, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)
    return done, marker


def errors(done: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in done.stderr.splitlines() if line.startswith("ERROR")]


def test_a_misspelt_name_in_settings_json_stops_the_run_before_anything_is_submitted(tmp_path: Path) -> None:
    script(tmp_path, batch_sytem="local")
    done, marker = run(tmp_path, "--batch")
    assert done.returncode == 1, done.stderr[-3000:]
    assert not marker.exists(), "a job went to sbatch"
    assert errors(done) == [
        f"ERROR: In the settings file {tmp_path / 'settings.json'}: 'batch_sytem' is not a known setting. Did you "
        f"mean 'batch_system'? Rename it (known settings: {', '.join(sorted({*settings.SETTINGS, *settings.RENAMED_SETTINGS}))})."
    ], done.stderr[-3000:]
    assert "Traceback" not in done.stderr and "(default " not in done.stderr
    assert not (tmp_path / "results").exists()


def test_a_misspelt_name_given_to_set_setting_stops_the_run(tmp_path: Path) -> None:
    script(tmp_path, before='    b2batch.set_setting("batch_sytem", "local")\n')
    done, marker = run(tmp_path, "--batch")
    assert done.returncode == 1 and not marker.exists(), done.stderr[-3000:]
    [line] = errors(done)
    assert line.startswith("ERROR: In b2batch.set_setting('batch_sytem', ...): 'batch_sytem' is not a known "
                           "setting. Did you mean 'batch_system'?"), line


@pytest.mark.parametrize("mode", [("--batch",), ()], ids=["batch", "local"])
def test_a_misspelt_setting_on_a_task_class_stops_the_run(tmp_path: Path, mode: tuple[str, ...]) -> None:
    script(tmp_path, attributes='    batch_sytem = "local"\n', batch_system="local")
    done, marker = run(tmp_path, *mode)
    assert done.returncode == 1, done.stderr[-3000:]
    assert not marker.exists() and not (tmp_path / "results").exists()
    [line] = errors(done)
    assert line.startswith("ERROR: Task class Simulate: the attribute 'batch_sytem' is not a setting b2batch "
                           "knows. Did you mean 'batch_system'? Rename it"), line


def test_other_unknown_names_get_one_short_warning_line_each(tmp_path: Path) -> None:
    script(tmp_path, batch_system="local", my_calibration="v7", _comment="names starting with _ are comments")
    done, marker = run(tmp_path, "--batch")
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if "my_calibration" in line]
    assert len(lines) == 1 and lines[0].endswith(  # before process() set up logging: without "WARNING: "
        f"In the settings file {tmp_path / 'settings.json'}: 'my_calibration' is not a setting b2batch knows; it is "
        f"ignored unless your code reads it with get_setting()."), done.stderr[-3000:]
    assert "_comment" not in done.stderr and "(default " not in done.stderr
    assert len(list((tmp_path / "results").rglob("events.txt"))) == 3


# --- task attributes that are no typos ---------------------------------------------------------------------

class UsesItsOwnNames(luigi.Task):
    queues = luigi.IntParameter(default=2)  # a parameter, close to 'queue'
    job_slot = 3  # close to 'job_slots', but the task's own: run() reads it
    transfer_file = "x"  # close to 'transfer_files', read in a nested function

    def log_dirs(self, sub: str) -> str:  # a method taking arguments is no setting
        return sub

    @property
    def env_scripts(self) -> list[str]:  # a property its own code reads
        return [self.transfer_file]

    def run(self) -> None:
        def inner() -> str:
            return self.transfer_file

        print(self.job_slot, inner(), self.env_scripts)


class SubclassOfB2batch(b2batch.Task):
    tasks_per_jobs = 2  # unused, close to 'tasks_per_job': a typo


class FrameworkOnly(b2batch.Task):
    pass


def test_parameters_methods_and_attributes_the_task_uses_are_no_typos() -> None:
    check_task_class(UsesItsOwnNames)
    check_task_class(FrameworkOnly)  # luigi's and b2batch's own attributes are never counted
    with pytest.raises(SettingError, match="'tasks_per_jobs' is not a setting b2batch knows. Did you mean "
                                           "'tasks_per_job'"):
        check_task_class(SubclassOfB2batch)


def test_settings_read_by_the_users_code_under_names_of_their_own_only_warn(caplog) -> None:
    with caplog.at_level(logging.WARNING):
        b2batch.set_setting("my_calibration", "v7")
        settings.check_settings()
    assert b2batch.get_setting("my_calibration") == "v7"
    assert [r.getMessage() for r in caplog.records] == [
        "In set_setting(): 'my_calibration' is not a setting b2batch knows; it is ignored unless your code reads it "
        "with get_setting()."]
    b2batch.set_setting("log_dri", "x")  # a typo: the check stops the run
    with pytest.raises(SettingError, match=r"set_setting\('log_dri', ...\): 'log_dri' is not a known setting. Did "
                                           "you mean 'log_dir'"):
        settings.check_settings()


# --- auto --------------------------------------------------------------------------------------------------

def test_auto_says_which_batch_system_it_chose_and_why_before_the_first_submission(tmp_path: Path) -> None:
    script(tmp_path, poll_interval=0.2)
    command = [sys.executable, "-m", "b2batch", "emulate", "lsf", "--", sys.executable, "wf.py", "--batch"]
    env = clean_env(B2BATCH_EMULATOR_DIR=str(tmp_path / "emulator"))
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stderr.splitlines()
    chose = [i for i, line in enumerate(lines) if "batch_system 'auto' chose" in line]
    submitted = [i for i, line in enumerate(lines) if "submitted task" in line]
    assert len(chose) == 1 and submitted and chose[0] < submitted[0], done.stderr[-3000:]
    assert lines[chose[0]].startswith("INFO: batch_system 'auto' chose lsf: bsub is on PATH ("), lines[chose[0]]


def test_auto_chooses_local_and_says_so_when_no_scheduler_is_on_path(monkeypatch, tmp_path: Path, caplog) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    systems.detect.cache_clear()
    try:
        with caplog.at_level(logging.INFO, logger="b2batch.systems"):
            assert systems.detect() == "local"
            assert systems.detect() == "local"
    finally:
        systems.detect.cache_clear()
    assert [r.getMessage() for r in caplog.records] == [
        "batch_system 'auto' chose local: none of bsub, condor_submit, sbatch or Grid Engine's qsub is on PATH. "
        "Set the setting batch_system (or --batch-system) to choose another."]
