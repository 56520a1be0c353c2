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


def test_the_logs_of_a_few_pilots_on_a_cluster_are_looked_at_every_50_ms(tmp_path: Path) -> None:
    run, system = submitted(tmp_path, Simulated, 2, pilot_jobs=2)
    try:
        assert system.watched()  # a waiting run asks for news every few milliseconds
        looks = []
        [pool] = system.pools.values()
        has_news = pool.queue.has_news
        pool.queue.has_news = lambda: looks.append(time.monotonic()) or has_news()  # type: ignore[method-assign]
        grow(system, "pilot-a")
        assert system.news() and len(looks) == 1
        grow(system, "pilot-a")
        assert not system.news() and len(looks) == 1, "the file system was looked at again within 50 ms"
        time.sleep(pooled_system.REMOTE_NEWS_EVERY[0])
        assert system.news() and len(looks) == 2
    finally:
        run.close()


def test_the_logs_of_many_pilots_on_a_cluster_are_looked_at_once_a_poll_pause(tmp_path: Path) -> None:
    run, system = submitted(tmp_path, Simulated, 120, pilot_jobs=120)
    try:
        [pool] = system.pools.values()
        assert len(pool.carriers) == 120
        grow(system, "pilot-a")
        assert system.news()
        time.sleep(0.1)
        grow(system, "pilot-a")
        assert not system.news()  # 121 files: at most every 0.2 s
        time.sleep(0.11)
        assert system.news()
    finally:
        run.close()
