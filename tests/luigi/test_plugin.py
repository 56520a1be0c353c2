"""A batch system written as b2luigi documents it (a BatchProcess subclass) keeps working on the engine."""

from __future__ import annotations

import re

import pytest


@pytest.mark.slow
def test_b2luigi_style_plugin_runs_every_task_as_its_job(workflow) -> None:
    flow = workflow("plugin.py")
    done = flow.run()
    assert done.returncode == 0, done.stderr[-3000:]
    assert (flow.folder / "results" / "count=3" / "fail=False" / "total.txt").read_text() == "3\n"
    calls = (flow.folder / "plugin_calls.log").read_text().split("\n")
    assert sorted(c for c in calls if c) == ["start Part"] * 3 + ["start Total"]
    assert re.search(r"Part +background +3", done.stderr), done.stderr[-2000:]


@pytest.mark.slow
def test_b2luigi_style_plugin_reports_a_failed_job_with_its_logs(workflow) -> None:
    flow = workflow("plugin.py")
    done = flow.run("--fail")
    assert done.returncode == 1
    assert "Part(n=-1): job" in done.stderr and "on background" in done.stderr
    assert "a failing part" in done.stderr  # the end of the job's stderr
    assert not (flow.folder / "results" / "count=3" / "fail=True" / "total.txt").exists()
