"""An error in a task's scheduler settings names that task and its parameters, also when tasks with the same
settings would have gone into one job array (HTCondor, Slurm, SGE, LSF). Nothing reaches a scheduler: the
settings are checked before any command runs, so no cluster is needed."""

from __future__ import annotations

import re

import pytest
from conftest import clean_env

SETTING = {"htcondor": "htcondor_settings", "slurm": "slurm_settings", "sge": "sge_settings", "lsf": "lsf_settings"}


def failures(stderr: str) -> dict[str, str]:
    """The summary's failed tasks: the task's name -> its message."""
    return dict(re.findall(r"^  (Simulate\(seed=\d\)): not submitted to \w+\n    (.*)$", stderr, re.MULTILINE))


@pytest.mark.parametrize("system", list(SETTING))
@pytest.mark.parametrize("all_bad", [True, False], ids=["every-task", "one-task"])
def test_a_settings_error_names_its_own_task(system: str, all_bad: bool, workflow, tmp_path) -> None:
    flow = workflow("bad_settings.py")
    # Nothing may be submitted anywhere: each submit command refuses its job (a missing one would stop the whole
    # run at the first good task, with one error for the run, before the bad task's settings are looked at).
    tools = tmp_path / "refusing-scheduler-tools"
    tools.mkdir()
    for name in ("sbatch", "qsub", "condor_submit", "bsub"):
        (tools / name).write_text("#!/bin/sh\necho 'refused: a test submits nothing' >&2\nexit 1\n")
        (tools / name).chmod(0o755)
    bare = clean_env(PATH=f"{tools}:/usr/bin:/bin")
    run = flow.run(system, *(["--all-bad"] if all_bad else []), "--batch", env=bare)
    assert run.returncode == 1, run.stderr[-3000:]
    found = failures(run.stderr)
    wanted = ["Simulate(seed=0)", "Simulate(seed=1)", "Simulate(seed=2)"] if all_bad else ["Simulate(seed=0)"]
    assert sorted(found) == wanted if all_bad else wanted[0] in found, run.stderr[-3000:]
    for task in wanted:
        assert f"Task {task} could not be submitted to {system}: Task {task}: " in found[task], found[task]
        assert SETTING[system] in found[task]
        others = [t for t in ("Simulate(seed=0)", "Simulate(seed=1)", "Simulate(seed=2)") if t != task]
        assert not any(other in found[task] for other in others), found[task]
