"""job_shape auto (the default): the run chooses per task family and batch system between pilots, bundles and
one job per task, from how long the family's finished tasks took; explicit settings win; tasks with other
job settings never share a pilot; the summary and the report say which shape each family got and why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.emulated import Emulated

from b2batch.engine.pilots.shape_rule import DEFAULT_CAP, LONG, MIN_READY, PROBES, TARGET_WALL, decide
from b2batch.settings.declared import PROFILES, SETTINGS


def settings(folder: Path, **values: object) -> None:
    base = {"output_wait_timeout": 5, "pilot_idle_timeout": 5, "heartbeat_timeout": 10}
    (folder / "settings.json").write_text(json.dumps({**base, **values}))


def report(folder: Path) -> dict:
    return json.loads(next((folder / "logs").glob("*.report.json")).read_text())


def carriers(rep: dict, family: str = "Leaf") -> dict[str, list[str]]:
    """Each worker job (or "" for a job of its own) -> the task ids it ran."""
    found: dict[str, list[str]] = {}
    for job in rep["jobs"]:
        if job["family"] == family:
            found.setdefault(job["carrier"].split(" (")[0], []).append(job["task_id"])
    return found


def kinds_of(folder: Path) -> dict[int, str]:
    """Leaf i -> the SHAPE_KIND its run saw."""
    return {int(log.stem): log.read_text().split()[2] for log in (folder / "runs").glob("*.log")}


def ks(shape) -> tuple[str, int]:
    return shape.kind, shape.size


# --- the rule -------------------------------------------------------------------------------------------------

def test_the_rule() -> None:
    # Nothing known: probes in pilots, the rest waits for them; too few to gain from pilots: jobs of their own.
    assert ks(decide("auto", None, 0.0, 1000, DEFAULT_CAP)) == ("pilots", PROBES)
    assert ks(decide("auto", None, 0.0, MIN_READY, DEFAULT_CAP)) == ("pilots", PROBES)
    assert decide("auto", None, 0.0, MIN_READY - 1, DEFAULT_CAP).kind == "job_per_task"
    # Short tasks: pilots sized to the backlog (ready x median / TARGET_WALL), within the throttle.
    shape = decide("auto", 0.4, 0.0, 1000, DEFAULT_CAP)
    assert (shape.kind, shape.size) == ("pilots", 40) and "median 0.4 s per task, 1000 ready" in shape.why
    assert ks(decide("auto", 0.4, 0.0, 1000, 8)) == ("pilots", 8)
    assert ks(decide("auto", 0.01, 0.0, 1000, DEFAULT_CAP)) == ("pilots", 1)
    # Tasks as long as a pilot's share, fewer than the throttle: one job each; more: pilots share them.
    assert decide("auto", 20.0, 0.0, 50, DEFAULT_CAP).kind == "job_per_task"
    assert ks(decide("auto", 20.0, 0.0, 500, DEFAULT_CAP)) == ("pilots", DEFAULT_CAP)
    # A probe that has run TARGET_WALL seconds decides without waiting for its end.
    assert decide("auto", None, TARGET_WALL - 1, 20, DEFAULT_CAP).kind == "pilots"
    assert decide("auto", None, TARGET_WALL + 1, 20, DEFAULT_CAP).kind == "job_per_task"
    # A few ready of a kind whose pilots run: they join them; none in pilots: jobs of their own.
    assert decide("auto", 0.4, 0.0, 3, DEFAULT_CAP, pooled=2).kind == "pilots"
    assert decide("auto", 0.4, 0.0, 3, DEFAULT_CAP).kind == "job_per_task"
    # Long tasks (minutes): one job each, however many; between: bundles only beyond the throttle.
    assert decide("auto", LONG, 0.0, 10_000, 10).kind == "job_per_task"
    assert decide("auto", 120.0, 0.0, 40, DEFAULT_CAP).kind == "job_per_task"
    assert ks(decide("auto", 120.0, 0.0, 400, 100)) == ("bundles", 4)
    # An explicit job_shape is kept; the run only sizes it.
    assert decide("job_per_task", 0.01, 0.0, 1000, DEFAULT_CAP).kind == "job_per_task"
    assert decide("bundles", 1.0, 0.0, 1000, DEFAULT_CAP).kind == "bundles"
    assert decide("pilots", 300.0, 0.0, 3, DEFAULT_CAP).kind == "pilots"


def test_the_rule_for_a_front_end_that_holds_units_back() -> None:
    # joblib hands over n_jobs batches at a time (its window): n_jobs=2 with 2 ready is an unknown backlog,
    # not a small kind; probes in pilots, then as many pilots as the window (the caller's parallelism).
    assert ks(decide("auto", None, 0.0, 2, DEFAULT_CAP, window=2)) == ("pilots", 2)
    shape = decide("auto", 0.5, 0.0, 2, DEFAULT_CAP, window=2)
    assert ks(shape) == ("pilots", 2) and "more held back" in shape.why
    assert ks(decide("auto", 0.5, 0.0, 16, DEFAULT_CAP, window=16)) == ("pilots", 16)
    assert ks(decide("auto", 0.5, 0.0, 500, 8, window=500)) == ("pilots", 8)  # at most the throttle
    assert ks(decide("auto", 90.0, 0.0, 4, DEFAULT_CAP, window=4)) == ("pilots", 4)
    # Long calls get a job each; fewer ready than the window: the rule as for tasks (1 call: its own job).
    assert decide("auto", LONG, 0.0, 4, DEFAULT_CAP, window=4).kind == "job_per_task"
    assert decide("auto", None, 0.0, 1, DEFAULT_CAP, window=2).kind == "job_per_task"
    assert ks(decide("auto", None, 0.0, 200, DEFAULT_CAP, window=1000)) == ("pilots", PROBES)
    # An explicit shape is kept.
    assert decide("job_per_task", 0.01, 0.0, 4, DEFAULT_CAP, window=4).kind == "job_per_task"
    assert ks(decide("pilots", 0.01, 0.0, 4, DEFAULT_CAP, window=4)) == ("pilots", 4)


def test_the_setting_and_b2luigis_profile() -> None:
    assert SETTINGS["job_shape"].default == "auto"
    assert SETTINGS["job_shape"].kind("pilots") == "pilots"
    with pytest.raises(ValueError):
        SETTINGS["job_shape"].kind("pilot")
    # b2luigi users expect one job per task: their profile keeps it (docs/migrating.md).
    assert PROFILES["b2luigi"]["job_shape"] == "job_per_task"


# --- local jobs -----------------------------------------------------------------------------------------------

def assert_short_tasks_in_pilots(done, folder: Path, n: int) -> dict:
    """The run of ``shapes.py --n n --kinds 2`` succeeded, its trivial leaves ran in 2-8 pilots and never in a job of
    their own, a pilot ran one kind only, and the report says the family got pilots; the report."""
    assert done.returncode == 0, done.stderr[-4000:]
    assert (folder / "results" / f"n={n}" / "seconds=0.0" / "kinds=2" / "sum.txt").read_text() == f"{n * (n - 1) // 2}\n"
    rep = report(folder)
    workers = carriers(rep)
    assert "" not in workers, "a trivial task got a job of its own"
    assert all(w.startswith("pilot job ") for w in workers) and 2 <= len(workers) <= 8, workers
    kinds = kinds_of(folder)
    assert kinds == {i: str(i % 2) for i in range(n)}  # each task ran with its own env
    for worker, task_ids in workers.items():  # another env: another pilot
        seen = {kinds[int(t.split("_")[1])] for t in task_ids}
        assert len(seen) == 1, (worker, seen)
    assert rep["job_shapes"]["Leaf"]["shape"] == "pilots" and rep["job_shapes"]["Leaf"]["units"] == {"pilots": n}
    return rep


def test_short_tasks_go_to_few_pilots_and_kinds_never_share_one(workflow, tmp_path: Path) -> None:
    wf = workflow("shapes.py")
    settings(tmp_path, local_slots=4)
    done = wf.run("--system", "local", "--n", "60", "--kinds", "2", timeout=240)
    assert_short_tasks_in_pilots(done, tmp_path, 60)
    # The summary says which shape the family got and why, in one line; the report records it.
    line = next(line for line in done.stderr.splitlines() if line.startswith("  Leaf: "))
    assert line.startswith("  Leaf: pilots (median ") and " per task, " in line and " ready" in line, line


def test_explicit_settings_win(workflow, tmp_path: Path) -> None:
    wf = workflow("shapes.py")
    settings(tmp_path)
    done = wf.run("--system", "local", "--n", "10", "--only-leaves", "--job-shape", "job_per_task")
    assert done.returncode == 0, done.stderr[-4000:]
    assert set(carriers(report(tmp_path))) == {""}  # every task in a job of its own
    assert "Job shapes" not in done.stderr
    wf = workflow("shapes.py", folder=tmp_path / "again")
    settings(wf.folder)
    done = wf.run("--system", "local", "--n", "10", "--only-leaves", "--pilots", "0")  # pilot_jobs = 0, set
    assert done.returncode == 0, done.stderr[-4000:]
    assert set(carriers(report(wf.folder))) == {""}
    # pilot_jobs = 2: pilots as before job_shape existed (pilot_jobs pilots, no shaping).
    wf = workflow("shapes.py", folder=tmp_path / "pilots")
    settings(wf.folder)
    done = wf.run("--system", "local", "--n", "10", "--only-leaves", "--pilots", "2")
    assert done.returncode == 0, done.stderr[-4000:]
    assert "Leaf         local-pilots" in done.stderr and "Job shapes" not in done.stderr


@pytest.mark.slow
def test_long_tasks_get_jobs_of_their_own_after_their_probes(workflow, tmp_path: Path) -> None:
    wf = workflow("shapes.py")
    settings(tmp_path, local_slots=MIN_READY)
    seconds = TARGET_WALL + 2
    done = wf.run("--system", "local", "--n", str(MIN_READY), "--seconds", str(seconds), "--only-leaves",
                  timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    workers = carriers(report(tmp_path))
    probes = [t for w, ts in workers.items() if w.startswith("pilot job ") for t in ts]
    # The probes ran in pilots; the others got jobs of their own once a probe had run TARGET_WALL seconds.
    assert len(probes) == PROBES and len(workers[""]) == MIN_READY - PROBES, workers
    line = next(line for line in done.stderr.splitlines() if line.startswith("  Leaf: "))
    assert line.startswith("  Leaf: job_per_task (") and (
        f"tasks {PROBES} in pilots, {MIN_READY - PROBES} in jobs of their own") in line, line


# --- the real Slurm -------------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.slurm
def test_slurm_200_trivial_tasks_need_few_jobs(slurm, workflow, tmp_path: Path) -> None:  # noqa: F811
    wf = workflow("shapes.py")
    settings(tmp_path)
    done = wf.run("--system", "slurm", "--n", "200", "--kinds", "2", timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    rep = report(tmp_path)
    workers = carriers(rep)
    assert "" not in workers and len(workers) <= 8, workers  # a few pilots, not 200 jobs
    kinds = kinds_of(tmp_path)
    assert kinds == {i: str(i % 2) for i in range(200)}  # each task ran with its own env
    for worker, task_ids in workers.items():
        assert len({kinds[int(t.split("_")[1])] for t in task_ids}) == 1, worker
    assert rep["scheduler_calls"].get("sbatch", 0) <= 10, rep["scheduler_calls"]
    assert rep["job_shapes"]["Leaf"]["shape"] == "pilots"


# --- the real SGE and the HTCondor and LSF emulators ----------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("system", [pytest.param("sge", marks=pytest.mark.sge), "htcondor", "lsf"])
def test_short_tasks_go_to_pilots_on_each_batch_system(request, workflow, tmp_path: Path, system: str) -> None:
    wf = workflow("shapes.py")
    if system == "sge":
        request.getfixturevalue("sge")  # the cluster must be up
        settings(tmp_path)
        done = wf.run("--system", "sge", "--n", "24", "--kinds", "2", timeout=600)
    else:
        emulated = Emulated(system, wf, tmp_path)
        settings(tmp_path, scheduler_unreachable_timeout=8)
        done = emulated.run("--n", "24", "--kinds", "2", timeout=600)
    assert_short_tasks_in_pilots(done, tmp_path, 24)
