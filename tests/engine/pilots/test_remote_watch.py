"""Pilots on a cluster's shared file system, watched as often as it allows: the steering process looks at their
logs for news (a unit that ended) at most some hundreds of files a second, and an idle pilot lists its queue at a
pause that grows with the pilots that share it. Few pilots: a stage's last unit and the next stage's first are
seen within about a tenth of a second, not a poll pause (0.2 s) or an idle pause (1 s) later."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from helpers.simulated import Simulated, SimulatedHere, make_job

from b2batch.engine import Job, Run
from b2batch.engine.pilots import pooled_system, worker_jobs
from b2batch.engine.pilots.kinds import PilotSystem
from b2batch.settings.runconfig import run_config


def pilots(inner: type[Simulated]) -> tuple[Run, PilotSystem]:
    run = Run(config=run_config())  # with the front-end's job-script maker, which pilots need
    return run, run.add_system("simulated", lambda r: PilotSystem(r, inner(r)))


def unit(tmp_path: Path, key: str, pilot_jobs: int) -> Job:
    job = make_job(tmp_path, key, task_file_dir=str(tmp_path / "task_files"), log_dir=str(tmp_path / "logs"),
                   pilot_idle_timeout=60.0, heartbeat_timeout=60.0, shell="bash", pilot_jobs=pilot_jobs)
    job.unit, job.bootstrap = {"call": "builtins:print"}, {"frontend": "calls"}
    return job


def submitted(tmp_path: Path, inner: type[Simulated], count: int, pilot_jobs: int) -> tuple[Run, PilotSystem]:
    run, system = pilots(inner)
    for n in range(count):
        run.submit(unit(tmp_path, f"u{n}", pilot_jobs))
    run.poll()
    return run, system


def idle_pauses(tmp_path: Path) -> list[float]:
    return [json.loads(spec.read_text())["worker"]["idle_pause"]
            for spec in tmp_path.glob("task_files/_pilots/*/jobs/*/job.json")]


@pytest.mark.parametrize(("count", "pause"), [(2, 0.1), (25, 0.5), (80, 1.0)])
def test_an_idle_pilot_on_a_cluster_lists_its_queue_more_seldom_the_more_pilots_share_it(
        tmp_path: Path, count: int, pause: float) -> None:
    run, _system = submitted(tmp_path, Simulated, count, pilot_jobs=count)
    try:
        assert idle_pauses(tmp_path) == [pause] * count
    finally:
        run.close()


def test_an_idle_pilot_on_this_host_looks_every_50_ms(tmp_path: Path) -> None:
    run, _system = submitted(tmp_path, SimulatedHere, 2, pilot_jobs=2)
    try:
        assert idle_pauses(tmp_path) == [worker_jobs.LOCAL_IDLE_PAUSE] * 2 == [0.05] * 2
    finally:
        run.close()


def grow(system: PilotSystem, worker: str) -> None:
    """What a worker does as a unit of it ends: a line more in its log."""
    [pool] = system.pools.values()
    with open(Path(pool.queue.done) / f"{worker}.jsonl", "a") as log:
        log.write('{"name": "x", "start": 1.0}\n')


class Clock:
    """The pooled system's clock, moved on by the test (a loaded machine's stall changes nothing)."""

    def __init__(self) -> None:
        self.now = time.monotonic()

    def monotonic(self) -> float:
        return self.now

    @staticmethod
    def sleep(seconds: float) -> None:
        time.sleep(seconds)


def counted(system: PilotSystem) -> list[None]:
    """The looks at the pool's file system that the system's news() makes."""
    looks: list[None] = []
    [pool] = system.pools.values()
    has_news = pool.queue.has_news
    pool.queue.has_news = lambda: looks.append(None) or has_news()  # type: ignore[method-assign]
    return looks


@pytest.mark.parametrize(("count", "every"), [(2, 0.05), (120, 0.2)])
def test_the_logs_of_pilots_on_a_cluster_are_looked_at_as_often_as_their_number_allows(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: int, every: float) -> None:
    """Two pilots' logs (3 files) every 50 ms; 120 pilots' (121 files, 500 a second) every 0.2 s."""
    run, system = submitted(tmp_path, Simulated, count, pilot_jobs=count)
    try:
        [pool] = system.pools.values()
        assert len(pool.carriers) == count
        assert system.watched()  # a waiting run asks for news every few milliseconds
        clock = Clock()
        monkeypatch.setattr(pooled_system, "time", clock)
        looks = counted(system)
        grow(system, "pilot-a")
        assert system.news() and len(looks) == 1
        grow(system, "pilot-a")
        clock.now += every * 0.9
        assert not system.news() and len(looks) == 1, "the file system was looked at again too soon"
        clock.now += every * 0.1 + 1e-6
        assert system.news() and len(looks) == 2
        assert not system.news() and len(looks) == 2
    finally:
        run.close()
