"""The joblib backend's jobs take the shape every front-end's rule gives (job_shape auto by default,
docs/job-shapes.md): joblib hands over n_jobs batches at a time, so the rule sees a window of an unknown
backlog; short calls go to pilots (as many as n_jobs), one call gets its own job, job_shape and an explicit
pilot_jobs win."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytest.importorskip("joblib")

from joblib import Parallel, delayed, parallel_config  # noqa: E402

import b2batch.joblib  # noqa: E402, F401  (registers the backend)
from b2batch.emulators import make_bin_dir  # noqa: E402


def double(x: int) -> int:
    return 2 * x


def report(tmp_path: Path) -> dict:
    [path] = (tmp_path / "logs").glob("b2batch-run-*.report.json")
    return json.loads(path.read_text())


def run(tmp_path: Path, calls: int, n_jobs: int, **options: object) -> dict:
    with parallel_config(backend="b2batch", export_metadata=True, **options):
        assert Parallel(n_jobs=n_jobs)(delayed(double)(i) for i in range(calls)) == [2 * i for i in range(calls)]
    return report(tmp_path)


@pytest.fixture
def lsf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("PATH", f"{make_bin_dir('lsf', tmp_path / 'bin')}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("B2BATCH_EMULATOR_DIR", str(tmp_path / "emulator"))
    return "lsf"


def test_short_calls_with_n_jobs_2_go_to_two_pilots(lsf: str, tmp_path: Path) -> None:
    content = run(tmp_path, 60, 2, batch_system=lsf)
    totals = content["totals"]
    assert totals["worker_jobs"]["pilot"]["submitted"] <= 3, totals  # two, and one more if one was lost
    assert totals["batch_jobs"] == totals["worker_jobs"]["pilot"]["submitted"], totals  # no call in a job of its own
    [shape] = content["job_shapes"].values()
    assert shape["shape"] == "pilots" and "more held back" in shape["why"], shape


def test_one_call_gets_a_job_of_its_own(lsf: str, tmp_path: Path) -> None:
    totals = run(tmp_path, 1, 2, batch_system=lsf)["totals"]
    assert totals["batch_jobs"] == 1 and not totals["worker_jobs"], totals


@pytest.mark.parametrize("options", [{"job_shape": "job_per_task"}, {"pilot_jobs": 0}], ids=["job_shape", "pilot_jobs"])
def test_job_per_task_and_pilot_jobs_0_give_a_job_per_unit(lsf: str, tmp_path: Path, options: dict) -> None:
    totals = run(tmp_path, 6, 2, batch_system=lsf, batch_size=1, **options)["totals"]
    assert totals["batch_jobs"] == 6 and not totals["worker_jobs"], totals


def test_an_explicit_pilot_jobs_wins(tmp_path: Path) -> None:
    totals = run(tmp_path, 40, 8, batch_system="local", pilot_jobs=1)["totals"]
    assert totals["worker_jobs"]["pilot"]["submitted"] == 1, totals
