"""A run as root against a real HTCondor: HTCondor never runs a job owned by root. The run stops before any job
is submitted, with one line saying so and what to do (b2batch/systems/htcondor.py: ROOT_REFUSAL, a
RunStoppingError: the run stops at the first refusal)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from b2batch.errors import BatchSystemError, SchedulerCommandError, TransientCommandError
from b2batch.systems.htcondor import ROOT_REFUSAL, refused_as_root
from helpers.htcondor_real import WORKFLOWS, condor_env, need_pool

#: What condor_submit of HTCondor 25.14 prints as root (the default CONDOR_IDS, and CONDOR_IDS = 0.0).
REFUSALS = ("ERROR: Failed to create new User record for condor@localdomain.\nThe given user is not allowed to own "
            "jobs\n", 'ERROR: Setting job owner to "root" is not permitted\n')


@pytest.mark.parametrize("stderr", REFUSALS)
def test_the_refusal_is_recognised_for_root_only(stderr: str) -> None:
    error = SchedulerCommandError(["condor_submit", "-terse", "-"], 1, "", stderr)
    assert refused_as_root(error, 0)
    assert not refused_as_root(error, 1000)  # another user's refusal keeps HTCondor's own words
    assert not refused_as_root(SchedulerCommandError(["condor_submit"], 1, "", "ERROR: Parse error"), 0)
    assert not refused_as_root(TransientCommandError(["condor_submit"], 1, "", stderr), 0)
    assert not refused_as_root(BatchSystemError(stderr), 0)


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="the tests run as root here; as another user there is nothing to see")
def test_run_as_root_stops_with_one_line(tmp_path: Path) -> None:
    need_pool()
    shutil.copy(WORKFLOWS / "scheduler_jobs.py", tmp_path)
    (tmp_path / "settings.json").write_text(json.dumps({"job_shape": "job_per_task"}))
    env = {**os.environ, **condor_env()}
    queued = subprocess.run(["condor_q", "-allusers", "-af", "ClusterId", "ProcId"], env=env, capture_output=True, text=True).stdout
    done = subprocess.run([sys.executable, "scheduler_jobs.py", "--system", "htcondor", "--n", "3"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 1
    lines = [line for line in done.stderr.splitlines() if "HTCondor never runs jobs owned by root" in line]
    assert lines == [f"ERROR: {ROOT_REFUSAL}"], done.stderr[-3000:]  # once, after the summary
    assert "(stopped by the error below)" in done.stderr, done.stderr[-3000:]
    assert "not allowed to own jobs" not in done.stderr and "is not permitted" not in done.stderr
    # HTCondor was asked once; the run stopped there: no other job was tried.
    report = json.loads(next((tmp_path / "logs").glob("*.report.json")).read_text())
    assert report["scheduler_calls"] == {"condor_submit": 1}, report["scheduler_calls"]
    assert subprocess.run(["condor_q", "-allusers", "-af", "ClusterId", "ProcId"], env=env, capture_output=True,
                          text=True).stdout == queued
