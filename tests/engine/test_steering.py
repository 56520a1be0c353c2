"""The one loop shape that drives a run (engine/steering.py), and that every front-end uses it."""

from __future__ import annotations

import ast
import threading
import time
from pathlib import Path

from b2batch.engine.jobconfig import NO_SETTINGS
from b2batch.engine import Job, JobFiles, Run
from b2batch.engine.steering import Step, Steering, drive

PACKAGE = Path(__file__).resolve().parents[2] / "b2batch"


class Recording(Steering):
    """Feeds one job per round until three went in; stops when all three came back."""

    def __init__(self, tmp_path: Path, run: Run) -> None:
        self.tmp_path, self.run = tmp_path, run
        self.fed: list[str] = []
        self.back: list[str] = []
        self.events: list[str] = []

    def feed(self) -> None:
        self.events.append("feed")
        if len(self.fed) < 3:
            key = f"j{len(self.fed)}"
            files = JobFiles.at(self.tmp_path / "jobs", "f", key, self.tmp_path / "logs" / key)
            job = Job(key=key, name=key, family="f", system="local", files=files, config=NO_SETTINGS)
            files.make_folders()
            files.write_wrapper("#!/bin/sh\nprintf '0\\n' > \"$(dirname \"$0\")/exit_code\"\n")
            self.fed.append(key)
            self.run.submit(job)

    def ended(self, job: Job) -> None:
        self.events.append(f"ended {job.key}")
        self.back.append(job.key)
        self.run.settle(job, job.outcome.exit_code == 0)

    def step(self, ended: int) -> Step:
        self.events.append(f"step {ended}")
        if len(self.back) == 3:
            return Step.STOP
        return Step.AGAIN if ended else Step.WAIT

    def pause(self, run: Run) -> None:
        self.events.append("pause")
        run.wait(0.05)


def test_drive_feeds_polls_hands_back_and_stops_when_the_front_end_says_so(tmp_path: Path) -> None:
    from b2batch.systems.local import LocalSystem

    run = Run(poll_pause=0.05)
    run.add_system("local", LocalSystem)
    steering = Recording(tmp_path, run)
    try:
        drive(run, steering)
    finally:
        run.close()
    assert sorted(steering.back) == ["j0", "j1", "j2"]
    assert not run.live
    events = steering.events
    assert events[0] == "feed" and events[-1].startswith("step ") and events[-1] != "step 0"
    # every poll is preceded by a feed and followed by one step; ended jobs come between the two
    assert events.count("feed") == sum(e.startswith("step") for e in events)
    for i, event in enumerate(events):
        if event == "pause":  # a pause only after a step that handed nothing back (WAIT), never after AGAIN
            assert events[i - 1] == "step 0"
        if event.startswith("ended"):
            assert events[i - 1] == "feed" or events[i - 1].startswith("ended")


def _polls_outside_the_loop(path: Path) -> list[int]:
    """Lines of ``path`` that call ``<something>.poll()`` without arguments: a run's poll outside drive()."""
    tree = ast.parse(path.read_text())
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "poll"
            and not node.args and not node.keywords and not _is_a_subprocess(node.func.value)]


def _is_a_subprocess(receiver: ast.expr) -> bool:
    """``self._process.poll()``, ``popen.poll()``: a local process's poll (b2luigi's TestProcess), not a run's."""
    name = receiver.attr if isinstance(receiver, ast.Attribute) else getattr(receiver, "id", "")
    return "process" in name.lower() or "popen" in name.lower()


#: The one front-end path that is not on the engine's loop: with luigid, luigi's own worker loop drives the graph
#: and asks each task's stand-in process (JobTaskProcess.is_alive) whether it still runs.
OUTSIDE_THE_LOOP = {"luigi_frontend/jobs.py": "TaskJobs.poll, for JobTaskProcess under luigi's own worker (luigid)",
                    "luigi_frontend/job_task_process.py": "JobTaskProcess.is_alive, under luigi's own worker"}


def test_every_front_end_drives_its_run_with_the_engines_loop() -> None:
    found: dict[str, list[int]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.split("/")[0] in ("engine", "systems", "emulators") or relative in OUTSIDE_THE_LOOP:
            continue
        lines = _polls_outside_the_loop(path)
        if lines:
            found[relative] = lines
    # popen.poll() of a local process is not a run's poll: the local batch system is under systems/
    assert not found, (f"these front-end modules poll a run themselves instead of using "
                       f"b2batch.engine.steering.drive: {found}")
    users = {relative for relative in ("luigi_frontend/graph_runner.py", "calls/executor.py", "farm/farm_pilots.py")
             if "drive(" in (PACKAGE / relative).read_text()}
    assert users == {"luigi_frontend/graph_runner.py", "calls/executor.py", "farm/farm_pilots.py"}


def test_the_luigid_path_still_polls_through_task_jobs() -> None:
    text = (PACKAGE / "luigi_frontend" / "job_task_process.py").read_text()
    assert "class JobTaskProcess" in text and "self.jobs.poll()" in text


class _Watched:
    """A batch system that has news once ``news_at`` (monotonic) has passed."""

    def __init__(self, run: Run, news_at: float, watched: bool = True) -> None:
        self.run, self.news_at, self._watched, self.asked = run, news_at, watched, 0

    def watched(self) -> bool:
        return self._watched

    def news(self) -> bool:
        self.asked += 1
        return time.monotonic() >= self.news_at


def test_a_wait_between_polls_ends_when_a_watched_system_has_news() -> None:
    """A unit of local pilots that ended is polled for within moments, not a poll pause later; a system that
    cannot have news is not asked, and the run waits its pause."""
    run = Run(poll_pause=30)
    system = run.add_system("watched", lambda r: _Watched(r, time.monotonic() + 0.2))  # type: ignore[arg-type]
    begin = time.monotonic()
    run.wait()
    assert 0.2 <= time.monotonic() - begin < 10 and system.asked >= 2
    woken = threading.Event()
    woken.set()
    begin = time.monotonic()
    run.wait(wake=woken)  # a front-end's request wakes it too
    assert time.monotonic() - begin < 10
    quiet = Run(poll_pause=0.3)
    unwatched = quiet.add_system("quiet", lambda r: _Watched(r, 0.0, watched=False))  # type: ignore[arg-type]
    begin = time.monotonic()
    quiet.wait()
    assert time.monotonic() - begin >= 0.3 and unwatched.asked == 0


def test_a_shaped_local_system_has_the_news_of_its_own_jobs() -> None:
    """With job_shape auto on local, a unit in a job of its own (a probe) ends in a process of the local
    system: its end ends the run's wait, as a pilot's log line does."""
    from b2batch.engine.pilots.shaping_system import ShapingSystem
    from b2batch.systems.local import LocalSystem

    run = Run(poll_pause=30)
    shaped = run.add_system("local", lambda r: ShapingSystem(r, LocalSystem(r)))
    assert shaped.watched() and not shaped.news()
    shaped.inner.pool.any_ended = lambda: True  # type: ignore[attr-defined]  # a local job's process ended
    assert shaped.news()
