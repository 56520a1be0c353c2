"""The node side of a job works with the JobConfig its steering process made (issue 41, must-have 1): the job's
spec carries it, and a settings file edited between the job's submission and its start changes nothing of what
b2batch's code does for the job there; the task's own ``get_setting`` still reads the settings files then.

The job runs in this process (``task_on_node.main`` on the spec file), no cluster and no subprocess.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
from pathlib import Path
from typing import Any

import luigi
import pytest

import b2batch
from b2batch.jobscript import base_folder
from b2batch.luigi_frontend import task_on_node
from b2batch.luigi_frontend.dispatching import child_environment
from b2batch.luigi_frontend.file_settings import FileSettings
from b2batch.luigi_frontend.task_job_files import write_task_job_files


class LooksAround(b2batch.Task):
    """Writes what b2batch's code on the node gives it, and what its own get_setting answers."""

    n = luigi.IntParameter()

    def output(self) -> Any:
        yield self.add_to_output("seen.json")

    def run(self) -> None:
        seen = {"environment": child_environment(self), "scratch_dir": FileSettings(self).scratch_dir,
                "checkpoint": str(self.checkpoint_path), "own_env": b2batch.get_setting("env", task=self)}
        Path(self.get_output_file_name("seen.json")).write_text(json.dumps(seen))


def _settings(which: str) -> dict[str, Any]:
    return {"env_script": f"env_{which}.sh", "env": {"WHICH": which}, "scratch_dir": f"scratch_{which}",
            "task_file_dir": f"jobs_{which}"}


@pytest.fixture
def job_process(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Run a job's spec in this process, and put back what the node side changes of it (the SIGTERM handler,
    the active spec, the pinned base folder, sys.path, the root logger's handlers)."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(task_on_node, "_active_spec", None)
    handler, handlers = signal.getsignal(signal.SIGTERM), list(logging.getLogger().handlers)

    def run(spec_file: str) -> int:
        try:
            with base_folder.base_dir_pinned(None):
                return task_on_node.main([spec_file])
        finally:
            signal.signal(signal.SIGTERM, handler)
            logging.getLogger().handlers[:] = handlers

    return run


def test_a_settings_file_edited_after_submission_changes_nothing_the_job_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, job_process: Any) -> None:
    for which in ("a", "edited"):
        (tmp_path / f"env_{which}.sh").write_text(f"export FROM_SCRIPT={which}\n")
    settings_file = tmp_path / "settings.json"
    settings_file.write_text(json.dumps(_settings("a")))
    monkeypatch.setenv("B2BATCH_SETTINGS", str(settings_file))
    task = LooksAround(n=1)
    files = write_task_job_files(task)
    spec = json.loads(Path(files.path_of("spec")).read_text())
    assert spec["config"]["env_script"] == "env_a.sh" and spec["config"]["scratch_dir"] == "scratch_a"

    settings_file.write_text(json.dumps(_settings("edited")))  # before the job starts
    assert job_process(files.path_of("spec")) == 0

    seen = json.loads(Path(task.get_output_file_name("seen.json")).read_text())
    assert seen["environment"]["FROM_SCRIPT"] == "a" and seen["environment"]["WHICH"] == "a", seen
    assert seen["scratch_dir"] == "scratch_a", seen
    assert seen["checkpoint"] == str(files.folder / "checkpoint"), seen
    assert Path(seen["checkpoint"]).is_relative_to(tmp_path / "jobs_a"), seen
    # The task's own code reads the settings files as they are when it runs (the settings snapshot).
    assert seen["own_env"] == {"WHICH": "edited"}, seen
