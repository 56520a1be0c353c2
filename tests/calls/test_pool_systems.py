"""b2batch.Pool and pypoolparty's class paths on the other batch systems: the HTCondor and LSF emulators, the
local Slurm and SGE (slow), and the pypoolparty shim."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

import b2batch
import b2batch.pool
from b2batch.pool import PoolJobLostError, aliases, packing
from tests.conftest import clean_env, wait_for

SHIM = Path(__file__).resolve().parents[2] / "compat" / "pypoolparty-shim"


def fails_on_three(x: int) -> int:
    if x == 3:
        raise KeyError(x)
    return -x


def job_id_then_sleep(folder: str, x: int, seconds: float) -> int:
    Path(folder, f"{x}.{os.environ.get('SLURM_JOB_ID') or os.environ.get('JOB_ID')}").write_text("")
    time.sleep(seconds)
    return x


def array_throttle(_x: int) -> str:
    """Slurm's ArrayTaskThrottle of the array this task runs in (scontrol on the node)."""
    shown = subprocess.run(["scontrol", "show", "job", os.environ["SLURM_JOB_ID"]], capture_output=True, text=True)
    return next((w.split("=", 1)[1] for w in shown.stdout.split() if w.startswith("ArrayTaskThrottle=")), "none")


# --- pypoolparty's class paths ----------------------------------------------------------------------------

# (their constructor arguments against the real pypoolparty's: tests/dropins/pypoolparty/test_pool_differential.py)


def test_the_shim_makes_import_pypoolparty_b2batch() -> None:
    code = ("import pypoolparty, pypoolparty.slurm.array, b2batch.pool as ours\n"
            "from pypoolparty.sun_grid_engine import Pool\n"
            "print(pypoolparty.slurm.array.Pool is ours.slurm.array.Pool, pypoolparty.slurm.Pool is ours.slurm.Pool,"
            " Pool is ours.sun_grid_engine.Pool)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": f"{SHIM}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"})
    assert done.stdout.split() == ["True", "True", "True"], done.stderr


class LocalArrayPool(aliases.SlurmArrayPool):
    batch_system = "local"


def test_the_pypoolparty_semantics_a_raising_task_gives_none_and_the_work_dir_is_kept(tmp_path: Path) -> None:
    pool = LocalArrayPool(work_dir=str(tmp_path), polling_interval=0.2)
    assert pool.map(fails_on_three, range(5)) == [0, -1, -2, None, -4]
    assert pool.starmap(fails_on_three, []) == []
    [work_dir] = tmp_path.iterdir()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d", work_dir.name), "work_dir/<UTC time>, as pypoolparty's"
    assert any("KeyError: 3" in line["stderr"] for line in packing.read_outputs(work_dir))
    assert issubclass(PoolJobLostError, RuntimeError)


# --- the emulators --------------------------------------------------------------------------------------

@pytest.mark.parametrize("system", ["htcondor", "lsf"])
def test_pool_on_the_emulators(system: str, workflow, tmp_path: Path) -> None:
    script = workflow("pool_main.py")
    env = clean_env(B2BATCH_EMULATOR_DIR=str(tmp_path / "emulator"), B2BATCH_EMULATOR_SLOTS="4",
                    POOL_MAIN_VARIABLE="emulated")
    done = subprocess.run([sys.executable, "-m", "b2batch", "emulate", system, "--",
                           *script.command("--system", system)], cwd=script.folder, env=env, capture_output=True,
                          text=True, timeout=180, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert results == {"cube": [0, 1, 8, 27, 64], "lambda": [2, 3], "closure": [101, 102], "variable": "emulated"}


# --- the real Slurm and SGE -------------------------------------------------------------------------------

@pytest.mark.slurm
@pytest.mark.slow
def test_pool_on_slurm_with_a_job_cancelled_from_outside(slurm, tmp_path: Path) -> None:  # noqa: F811
    marks = tmp_path / "marks"
    marks.mkdir()
    with b2batch.Pool(batch_system="slurm", num_simultaneously_running_tasks=4, polling_interval=0.5,
                      max_num_resubmissions=1, verbose=False) as pool:
        assert pool.map(abs, range(-20, 0)) == list(range(20, 0, -1))
        with pytest.raises(KeyError) as raised:
            pool.map(fails_on_three, range(6), chunksize=2)
        assert any("item 3 of map(fails_on_three) (b2batch.Pool), in slurm job" in n for n in raised.value.__notes__)
        lost = pool.starmap_async(job_id_then_sleep, [(str(marks), 0, 300)])
        for attempt in (1, 2):
            mark = wait_for(lambda: list(marks.iterdir()), 120, f"attempt {attempt} to start")[0]
            subprocess.run(["scancel", mark.suffix[1:]], check=True)
            mark.unlink()
        with pytest.raises(RuntimeError, match="after 1 resubmission"):
            lost.get(timeout=120)


@pytest.mark.slurm
@pytest.mark.slow
def test_pypoolparty_slurm_pools_on_slurm(slurm, tmp_path: Path) -> None:  # noqa: F811
    array = b2batch.pool.slurm.array.Pool(num_simultaneously_running_tasks=3, polling_interval=0.5,
                                          work_dir=str(tmp_path / "array"))
    assert array.map(fails_on_three, range(6)) == [0, -1, -2, None, -4, -5]
    assert len(list((tmp_path / "array").iterdir())) == 1, "kept: a task raised"
    chunked = b2batch.pool.slurm.Pool(num_chunks=2, polling_interval=0.5, work_dir=str(tmp_path / "chunks"))
    assert chunked.starmap(pow, [(2, 2), (3, 2), (4, 2)]) == [4, 9, 16]
    assert list((tmp_path / "chunks").iterdir()) == [], "removed: all went well"


@pytest.mark.slurm
@pytest.mark.slow
def test_slurm_throttle_is_also_the_arrays_percent_k_and_slurm_call_timeout_reaches_the_commands(
        slurm, tmp_path: Path) -> None:  # noqa: F811
    with b2batch.Pool(batch_system="slurm", num_simultaneously_running_tasks=2, polling_interval=0.5,
                      slurm_call_timeout=25, work_dir=tmp_path) as pool:
        throttles = pool.map(array_throttle, range(6), chunksize=1)
        # Jobs submitted as an array carry the throttle as %2; one submitted alone is no array ("none"): which
        # of them go together depends on timing (the command itself is checked in the test below).
        assert set(throttles) <= {"2", "none"}, throttles
        slurm_system = pool.executor.run.systems["slurm"].inner  # the run shapes the pool's units (job_shape auto)
        assert slurm_system.call_timeout == 25
        assert slurm_system.monitor.intervals == (0.5, 0.5), "the pool's polling_interval, not the settings'"


def test_a_slurm_array_carries_the_runs_throttle_as_percent_k(tmp_path: Path) -> None:
    from b2batch.engine import Job, JobFiles, Run
    from b2batch.engine.jobconfig import NO_SETTINGS
    from b2batch.systems.slurm import SlurmSystem

    for limit, setting, expected in ((2, None, "--array=1-5%2"), (None, 3, "--array=1-5%3"),
                                     (None, None, "--array=1-5")):
        settings = {"max_jobs_in_flight": setting}
        job = Job(key="k", name="W(k)", family="W", system="slurm", files=JobFiles.at(tmp_path, "W", "k", tmp_path),
                  config=NO_SETTINGS.replace(**settings), params={})
        command, _stdin = SlurmSystem(Run(max_in_flight=limit)).array_command(job, [], tmp_path / "dispatch.sh",
                                                                              tmp_path, 5)
        assert expected in command, command


@pytest.mark.sge
@pytest.mark.slow
def test_pypoolparty_sge_pool_on_sge(sge, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    monkeypatch.setenv("POOL_SGE_VARIABLE", "crossed")
    pool = b2batch.pool.sun_grid_engine.Pool(num_chunks=2, polling_interval=0.5, work_dir=str(tmp_path))
    assert pool.map(fails_on_three, range(5)) == [0, -1, -2, None, -4]
    assert pool.map(os.environ.get, ["POOL_SGE_VARIABLE"]) == ["crossed"]


# --- the default shape: pilots for short items -------------------------------------------------------------

@pytest.mark.parametrize("system", [pytest.param("slurm", marks=[pytest.mark.slurm, pytest.mark.slow]),
                                    pytest.param("sge", marks=[pytest.mark.sge, pytest.mark.slow]),
                                    "htcondor", "lsf", "local"])
def test_a_map_of_200_short_items_with_default_settings_goes_to_pilots(system: str, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch,
                                                                       request: pytest.FixtureRequest) -> None:
    """b2batch.Pool takes job_shape auto: 200 trivial items (one per unit) need a handful of batch jobs, not 200."""
    from b2batch.display.report import batch_job_counts
    from b2batch.emulators import make_bin_dir

    if system in ("slurm", "sge"):
        request.getfixturevalue(system)
    if system in ("htcondor", "lsf"):
        monkeypatch.setenv("PATH", f"{make_bin_dir(system, tmp_path / 'bin')}{os.pathsep}{os.environ['PATH']}")
        monkeypatch.setenv("B2BATCH_EMULATOR_DIR", str(tmp_path / "emulator"))
    with b2batch.Pool(batch_system=system, work_dir=tmp_path, verbose=False) as pool:
        assert pool.map(abs, range(-200, 0), chunksize=1) == list(range(200, 0, -1))
        record = pool.executor.run.record
        counts = batch_job_counts(record.jobs.values(), record.worker_jobs.values())
    assert counts["worker_jobs"]["pilot"]["started"] >= 1, counts
    assert counts["batch_jobs"] <= 20, counts  # a job per item would be 200
