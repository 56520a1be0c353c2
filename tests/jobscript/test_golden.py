"""Rendered job scripts compared with golden files under tests/golden/ (B2BATCH_UPDATE_GOLDEN=1 rewrites
them). Machine-specific paths are replaced by placeholders before the comparison."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

import b2batch
from b2batch.luigi_frontend.jobs import task_wrapper
from b2batch.jobscript import base_folder
from b2batch.jobscript import wrapper
from b2batch.engine import Run
from b2batch.luigi_frontend.jobs import RunContext, TaskJobs
from b2batch.luigi_frontend.task_outputs import task_files
from b2batch.systems.htcondor import submit_description

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


class Reconstruct(b2batch.Task):
    run_number = b2batch.IntParameter()
    channel = b2batch.Parameter()

    def output(self):
        yield self.add_to_output("events.root")

    def run(self):
        pass


def _normalise(text: str, base: Path) -> str:
    return (text.replace(str(wrapper.ENTRY_POINT), "<ENTRY_POINT>").replace(sys.executable, "<PYTHON>")
            .replace(str(base), "<BASE>"))


def _compare(name: str, text: str) -> None:
    golden = GOLDEN / name
    if os.environ.get("B2BATCH_UPDATE_GOLDEN"):
        golden.write_text(text)
    assert text == golden.read_text(), f"{name} differs from its golden file (B2BATCH_UPDATE_GOLDEN=1 updates it)"


@pytest.fixture
def task(tmp_path: Path) -> Reconstruct:
    (tmp_path / "setup.sh").write_text("export A=1\n")
    b2batch.set_setting("env_script", "setup.sh")
    b2batch.set_setting("env", {"OMP_NUM_THREADS": "1", "LABEL": "it's $HOME; `x`"})
    return Reconstruct(run_number=42, channel="mu mu")


def test_executable_wrapper(task: Reconstruct, tmp_path: Path) -> None:
    job_files = task_files(task)
    _compare("executable_wrapper.sh", _normalise(task_wrapper(task, job_files), tmp_path))


def test_htcondor_submit_description(task: Reconstruct, tmp_path: Path) -> None:
    b2batch.set_setting("htcondor_settings", {"request_cpus": 2, "request_memory": "2 GB", "+Experiment": '"belle2"'})
    job = TaskJobs(Run(), RunContext()).make(task)
    text = submit_description(job, str(job.files.wrapper), str(job.files.folder), "b2bGOLDEN")
    _compare("htcondor.sub", _normalise(text, tmp_path))


def test_htcondor_array_description(task: Reconstruct, tmp_path: Path) -> None:
    job = TaskJobs(Run(), RunContext()).make(task)
    text = submit_description(job, str(tmp_path / "arrays" / "dispatch.sh"), str(tmp_path / "arrays"), "b2bGOLDEN",
                              count=3, arguments="$(Process)", suffix=".$(Process)")
    _compare("htcondor_array.sub", _normalise(text, tmp_path))


def test_array_dispatch_script(tmp_path: Path) -> None:
    text = wrapper.render("array_dispatch.sh.j2", index_expression="${SLURM_ARRAY_TASK_ID}",
                          wrappers=[tmp_path / "a" / "executable_wrapper.sh", tmp_path / "b'c" / "executable_wrapper.sh"])
    _compare("array_dispatch.sh", _normalise(text, tmp_path))
    assert base_folder.base_dir() == tmp_path
