"""Pilots started before their units come (``BatchSystem.warm``, asked for by ``b2batch.Pool`` when it is made, as
``multiprocessing.Pool`` starts its processes): only where a pilot costs no allocation, as many as the units'
probes would get; they wait for the first units, which go to them (no other pilot is submitted). And pilots let
go of when the run closes, before the system that runs them waits for its ending jobs."""

from __future__ import annotations

from pathlib import Path

from helpers.simulated import Simulated, SimulatedHere, make_job

from b2batch.engine import Job, Run
from b2batch.engine.pilots.shape_rule import PROBES
from b2batch.engine.pilots.kinds import PilotSystem
from b2batch.engine.pilots.shaping_system import ShapingSystem
from b2batch.settings.runconfig import run_config

BOOTSTRAP = {"frontend": "calls"}


def shaped(inner: type[Simulated]) -> tuple[Run, ShapingSystem]:
    run = Run(config=run_config())  # with the front-end's job-script maker, which pilots need
    return run, run.add_system("simulated", lambda r: ShapingSystem(r, inner(r)))


def unit(tmp_path: Path, key: str, **settings: object) -> Job:
    job = make_job(tmp_path, key, task_file_dir=str(tmp_path / "task_files"), log_dir=str(tmp_path / "logs"),
                   pilot_idle_timeout=60.0, heartbeat_timeout=60.0, shell="bash",
                   **settings)
    job.unit, job.bootstrap = {"call": "builtins:print"}, BOOTSTRAP
    return job


def test_pilots_on_this_host_start_ahead_wait_and_take_the_first_units(tmp_path: Path) -> None:
    run, shaping = shaped(SimulatedHere)
    run.warm(unit(tmp_path, "workers"))
    [pool] = shaping.pilots.pools.values()
    assert len(pool.carriers) == PROBES and shaping.inner.submissions == [PROBES]
    for _ in range(3):  # no unit yet: the queue is not drained (its pilots would end within seconds)
        shaping.states([])  # (as a poll of a run with other jobs in flight looks at it)
    assert not pool.queue.drained_file.exists() and pool.warm
    units = [unit(tmp_path, f"u{n}") for n in range(12)]
    for job in units:
        run.submit(job)
    run.poll()
    assert len(pool.members) == 12 and not pool.warm  # the units went to that queue
    assert shaping.inner.submissions == [PROBES], "no pilot beyond those started ahead"
    run.close()


class Refusing(SimulatedHere):
    def submit(self, group: list[Job]) -> None:
        raise OSError("no slot for a pilot")


def test_pilots_that_cannot_start_ahead_fail_nothing_and_start_when_units_come(tmp_path: Path, caplog) -> None:
    run, shaping = shaped(Refusing)
    run.warm(unit(tmp_path, "workers"))  # no exception reaches the front-end's thread
    assert "were not started ahead (no slot for a pilot)" in caplog.text
    assert all(not pool.warm and not pool.carriers for pool in shaping.pilots.pools.values())
    run.close()


def test_no_pilot_starts_ahead_where_one_costs_an_allocation(tmp_path: Path) -> None:
    run, shaping = shaped(Simulated)  # a cluster's jobs
    run.warm(unit(tmp_path, "workers"))
    assert shaping.inner.submissions == [] and not shaping.pilots.pools
    run.close()


def test_no_pilot_starts_ahead_for_units_that_ask_for_jobs_of_their_own(tmp_path: Path) -> None:
    run, shaping = shaped(SimulatedHere)
    run.warm(unit(tmp_path, "workers", job_shape="job_per_task"))
    run.warm(unit(tmp_path, "workers", job_shape="bundles"))
    assert shaping.inner.submissions == [] and not shaping.pilots.pools
    run.close()


def test_a_closing_run_stops_the_pilots_added_over_a_systems_inner_one_before_that_system_closes(
        tmp_path: Path) -> None:
    """A run without --batch: ``local-pilots`` (the luigi workers' pilots) over the ``local`` system's inner one.
    That inner system waits at its close for its jobs that are ending (up to 5 s): the pilots must have been told
    to stop by then, or each run's end waited for them to give up on their own (the drain grace, 2 s)."""
    run, shaping = shaped(SimulatedHere)
    pilots = run.add_system("simulated-pilots", lambda r: PilotSystem(r, shaping.inner))
    pilots.warm(unit(tmp_path, "workers"), 2)
    [pool] = pilots.pools.values()
    told: list[bool] = []
    shaping.inner.close = lambda: told.append(pool.queue.stopping())  # type: ignore[method-assign]
    run.close()
    assert told == [True]


def test_a_closing_run_wakes_its_pilots_on_a_cluster_to_end_and_an_interrupted_one_does_not(tmp_path: Path) -> None:
    """The pilots of a run that closes are told to stop, then woken from their idle pause by the batch system
    (``wake_to_end``: one ``scancel --signal=CONT`` on Slurm) rather than seeing it after their pause (up to a
    second on a cluster); an interrupted run cancels them at once instead, without a wake."""
    for interrupted in (False, True):
        run, shaping = shaped(Simulated)
        calls: list[tuple[str, list[str]]] = []
        shaping.inner.wake_to_end = lambda jobs: calls.append(("wake_to_end", [j.key for j in jobs]))  # type: ignore
        shaping.inner.wake = lambda jobs: calls.append(("wake", [j.key for j in jobs]))  # type: ignore
        for n in range(12):
            run.submit(unit(tmp_path / str(interrupted), f"u{n}"))
        run.poll()
        [pool] = shaping.pilots.pools.values()
        assert pool.carriers
        pool.started.update(pool.carriers)  # the steering saw them at work
        calls.clear()
        if interrupted:
            run.interrupt()
        run.close()
        # (interrupted: cancelled at once, no wake, which would cost a scheduler command)
        assert calls == ([] if interrupted else [("wake_to_end", sorted(pool.carriers))]), calls
