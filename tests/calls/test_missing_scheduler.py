"""A batch system whose commands are not on PATH stops a Pool map or a joblib call with one error, the run's
own (``RunStoppingError``: no job of the run can go), not one "job lost" per chunk nor a repr of it."""

from __future__ import annotations

from pathlib import Path

import joblib
import pytest

import b2batch
from b2batch.errors import RunStoppingError


def double(x: int) -> int:
    return 2 * x


@pytest.fixture
def no_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "empty-bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))


def test_pool_map_raises_the_runs_one_error(no_tools: None) -> None:
    with b2batch.Pool(batch_system="slurm") as pool, pytest.raises(RunStoppingError) as raised:
        pool.map(double, range(6))
    text = str(raised.value)
    assert text.startswith("slurm cannot be used here: sbatch is not on PATH: cannot run `sbatch "), text
    assert "Is batch_system right" in text and "RunStoppingError(" not in text


def test_joblib_raises_the_runs_one_error(no_tools: None) -> None:
    import b2batch.joblib  # noqa: F401 (registers the backend)

    with joblib.parallel_config(backend="b2batch", batch_system="slurm"), pytest.raises(RunStoppingError) as raised:
        joblib.Parallel()(joblib.delayed(double)(i) for i in range(6))
    assert str(raised.value).startswith("slurm cannot be used here: sbatch is not on PATH"), str(raised.value)
