"""Every setting a command-line flag of the luigi front-end can set gives the same jobs whether it is set by the
flag or with ``set_setting`` (issue 41, must-have 2): the job scripts written for a task are identical, byte for
byte. A flag that answered differently from the settings store once left ``--batch-system apptainer`` jobs out of
their container. No scheduler is asked: the jobs are made and their files written, not submitted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import luigi
import pytest

import b2batch
from b2batch.engine import Run
from b2batch.errors import SettingError
from b2batch.luigi_frontend import flags, workflow
from b2batch.luigi_frontend.jobs import RunContext, TaskJobs
from b2batch.settings import SETTINGS


class Reconstruct(luigi.Task):
    run_number = luigi.IntParameter()

    def output(self) -> Any:
        return luigi.LocalTarget(f"out_{self.run_number}.txt")

    def run(self) -> None:  # pragma: no cover - never runs here
        pass


#: The values each flag-set setting is tried with.
VALUES = {"batch_system": ["local", "slurm", "sge", "htcondor", "lsf", "apptainer"], "workers": [1, 3]}


def flag_settings() -> dict[str, str]:
    """The flags (both profiles' parsers) whose value is a declared setting, by setting name."""
    names = [flag for flag, _options in flags.FLAGS] + [n for names, _o in flags.B2LUIGI_FLAGS for n in names]
    return {flag[2:].replace("-", "_"): flag for flag in names
            if flag.startswith("--") and flag[2:].replace("-", "_") in SETTINGS}


def test_the_flags_that_set_settings_are_known() -> None:
    # a new flag that sets a setting must be added to VALUES, so that the comparison below covers it
    assert sorted(flag_settings()) == sorted(VALUES)


def job_files_of(argv: list[str], folder: Path) -> dict[str, str]:
    """The files written for the jobs of two tasks, as process() makes them with the flags ``argv``."""
    args, _rest = flags.parse(argv)
    run = Run(config=workflow.config_of_flags(args))
    try:
        jobs = TaskJobs(run, RunContext(script=str(folder / "workflow.py")))
        written = {}
        for task in (Reconstruct(run_number=1), Reconstruct(run_number=2)):
            job = jobs.make(task)
            jobs.write_files(job)
            written[f"{task.task_id} system"] = job.system
            for path in sorted(job.files.folder.iterdir()):
                written[f"{task.task_id} {path.name}"] = path.read_text()
        return written
    finally:
        run.close()


@pytest.mark.parametrize("setting,value", [(s, v) for s, values in VALUES.items() for v in values])
def test_flag_and_set_setting_write_identical_job_scripts(setting: str, value: Any, tmp_path: Path) -> None:
    b2batch.set_setting("apptainer_image", "/images/el9.sif")  # the apptainer system needs one either way
    flag = flag_settings()[setting]
    by_flag = job_files_of([flag, str(value)], tmp_path)
    b2batch.set_setting(setting, value)
    by_setting = job_files_of([], tmp_path)
    assert by_flag == by_setting
    wrappers = [text for name, text in by_flag.items() if name.endswith("executable_wrapper.sh")]
    assert len(wrappers) == 2
    if value == "apptainer":  # the job runs in the container
        assert all("/images/el9.sif" in text and "exec" in text for text in wrappers)


def test_apptainer_without_an_image_fails_the_same_both_ways(tmp_path: Path) -> None:
    errors = []
    for argv in (["--batch-system", "apptainer"], []):
        if not argv:
            b2batch.set_setting("batch_system", "apptainer")
        with pytest.raises(SettingError) as caught:
            job_files_of(argv, tmp_path)
        errors.append(str(caught.value))
    assert errors[0] == errors[1] and "'apptainer_image' is not set" in errors[0]
