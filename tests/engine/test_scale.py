"""Scheduler calls grow with the number of submissions and polls, not with the number of tasks; the
throttle bounds the jobs in flight. Run under the HTCondor and LSF emulators."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from b2batch.engine import Job, NativeState, Run
from b2batch.engine.config import RunConfig
from b2batch.engine.polling import JobMonitor

from helpers.emulated import Emulated


def _calls(emulated: Emulated, stderr: str) -> dict[str, int]:
    """The scheduler commands of the run, from its report; the summary names the same counts."""
    (report,) = (emulated.wf.folder / "logs").glob("b2batch-run-*.report.json")
    calls = json.loads(report.read_text())["scheduler_calls"]
    assert "Scheduler commands: " + ", ".join(f"{n} {p}" for p, n in calls.items()) + "." in stderr
    return calls


@pytest.mark.slow
@pytest.mark.parametrize("system", ["htcondor", "lsf"])
def test_independent_tasks_go_as_one_array_and_one_status_query_per_poll(system: str, workflow,
                                                                        tmp_path: Path) -> None:
    emulated = Emulated(system, workflow("scheduler_jobs.py"), tmp_path)
    emulated.env["B2BATCH_EMULATOR_SLOTS"] = "8"
    # however loaded the machine, luigi starts all 40 within the window; one job per task (job_shape auto would
    # send 40 trivial tasks to pilots: tests/engine/pilots/test_job_shapes.py)
    emulated.settings(submission_window=60, job_shape="job_per_task")
    done = emulated.run("--n", "40")
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(emulated.outputs()) == 40
    calls = _calls(emulated, done.stderr)
    submit, status = ("condor_submit", "condor_q") if system == "htcondor" else ("bsub", "bjobs")
    assert calls[submit] == 1, calls  # 40 tasks, one array
    # Polls are paced by poll_interval (0.5 s in the script), whatever the number of tasks.
    assert calls[status] < 60, calls


@pytest.mark.slow
def test_throttle_bounds_the_jobs_in_flight(workflow, tmp_path: Path) -> None:
    emulated = Emulated("htcondor", workflow("scheduler_jobs.py"), tmp_path)
    emulated.env["B2BATCH_EMULATOR_SLOTS"] = "16"
    emulated.settings(max_jobs_in_flight=3, output_wait_timeout=3)
    done = emulated.run("--n", "9", "--mode", "span", "--seconds", "2")
    assert done.returncode == 0, done.stderr[-3000:]
    spans = [tuple(map(float, p.read_text().split())) for p in (emulated.wf.folder / "spans").iterdir()]
    assert len(spans) == 9
    most = max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans)
    assert most <= 3, spans
    assert _calls(emulated, done.stderr)["condor_submit"] >= 3


def test_scheduler_commands_are_paced_per_batch_system_of_a_run_and_counted() -> None:
    from b2batch.systems.command_runner import SchedulerCalls, run

    counted: list[str] = []
    times: list[float] = []  # when each command was let go (a command's own run time varies under load)

    def let_go(program: str) -> None:
        counted.append(program)
        times.append(time.monotonic())

    calls = SchedulerCalls(let_go, rate=4)
    start = time.monotonic()
    for _ in range(9):
        run(["/bin/true"], calls=calls)
    # at most 4 in any second: the first four at once, the fifth a second after the first, the ninth after two
    assert all(later - earlier >= 1 - 0.01 for earlier, later in zip(times, times[4:])), times
    assert times[3] - start < 0.5 and times[-1] - start >= 2 - 0.01, times
    assert counted == ["true"] * 9
    half = SchedulerCalls(rate=0.5)  # under one a second: one in any two seconds
    began = time.monotonic()
    run(["true"], calls=half)
    run(["true"], calls=half)
    assert time.monotonic() - began >= 2 - 0.01
    other = time.monotonic()
    run(["true"], calls=SchedulerCalls(rate=4))  # another system (or run) has a pace of its own
    run(["true"])  # a one-off command outside a run (b2batch cancel) is neither paced nor counted
    assert time.monotonic() - other < 0.2 and counted == ["true"] * 9


def test_monitor_asks_once_per_poll_and_backs_off_while_nothing_changes() -> None:
    queries: list[list[str]] = []
    state = {"value": "R"}

    def query(ids: list[str]) -> dict[str, NativeState]:
        queries.append(ids)
        return {i: NativeState(state["value"]) for i in ids}

    monitor = JobMonitor("test", query, (0.05, 0.4))
    for i in range(500):
        monitor.track(str(i))
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:
        for i in range(500):
            assert monitor.state(str(i)) == NativeState("R")
    assert all(len(ids) == 500 for ids in queries)  # one query answers for all jobs
    # Back-off: 0.05, 0.075, 0.11, ... up to 0.4 s: far fewer than 1.5 / 0.05 = 30 queries.
    assert 4 <= len(queries) <= 12, len(queries)
    state["value"] = "C"
    monitor.invalidate()
    assert monitor.state("1") == NativeState("C")
    assert monitor._interval == 0.05  # a change resets the interval


class ArraySystem:
    """A batch system for the Submitter alone: each flush one array, whose size it notes in ``submitted``;
    ``takes_now`` answers which waiting jobs go before the window ends (default: none)."""

    def __init__(self, submitted: list[int], takes_now=lambda waiting: []) -> None:
        self.submitted, self.takes_now = submitted, takes_now

    def groups(self, jobs: list) -> list[list]:
        return [jobs]

    def submit(self, group: list) -> None:
        self.submitted.append(len(group))


def test_waiting_jobs_go_when_an_array_is_full_or_the_submission_window_has_passed() -> None:
    from b2batch.engine.config import RunConfig
    from b2batch.engine.submission import Submitter

    submitted: list[int] = []

    class Job:
        pass

    submitter = Submitter(ArraySystem(submitted), lambda job: None, lambda job, message: None,
                          RunConfig(submission_window=0.3, max_array_size=3))
    submitter.flush_if_due()  # nothing waits
    for _ in range(2):
        submitter.enqueue(Job())
        submitter.flush_if_due()
    assert submitted == []  # luigi may start more ready tasks: wait for them
    submitter.enqueue(Job())
    submitter.flush_if_due()
    assert submitted == [3]  # a full array goes at once
    submitter.enqueue(Job())
    submitter.flush_if_due()
    time.sleep(0.35)
    assert submitted == [3]
    submitter.flush_if_due()
    assert submitted == [3, 1]  # the window has passed
    # luigi goes on starting tasks: the window doubles, so a long start costs few submissions
    submitter.enqueue(Job())
    time.sleep(0.35)
    submitter.flush_if_due()
    assert submitted == [3, 1]
    time.sleep(0.3)
    submitter.flush_if_due()
    assert submitted == [3, 1, 1]
    # after a quiet spell longer than the window, a new start of tasks begins with the setting's window
    time.sleep(1.3)
    submitter.enqueue(Job())
    time.sleep(0.35)
    submitter.flush_if_due()
    assert submitted == [3, 1, 1, 1]


def _taking_three() -> tuple:
    """A submitter (30 s window) whose system takes the waiting jobs once three wait: it, the sizes the system was
    asked about, and the sizes submitted."""
    from b2batch.engine.submission import Submitter

    submitted: list[int] = []
    asked: list[int] = []

    def takes_three(waiting) -> list:
        asked.append(len(waiting))
        return waiting if len(waiting) >= 3 else []

    submitter = Submitter(ArraySystem(submitted, takes_three), lambda job: None, lambda job, message: None,
                          RunConfig(submission_window=30, max_array_size=1000))
    return submitter, asked, submitted


def test_jobs_the_system_takes_now_go_every_fifth_of_a_second_not_after_the_window() -> None:
    """Jobs that gain nothing from the submission window (units for pilots, which take them from a queue) go as
    soon as the system says so, asked at most every 0.2 s while the hand-out goes on: the pilots start while it
    does, not after it."""
    from b2batch.engine.submission import EARLY_EVERY

    submitter, asked, submitted = _taking_three()
    for _ in range(5):
        submitter.enqueue(object())
        submitter.flush_if_due()
    assert (asked, submitted) == ([1], [])  # asked once in a slice
    time.sleep(EARLY_EVERY + 0.05)
    submitter.enqueue(object())
    submitter.flush_if_due()
    assert (asked, submitted) == ([1, 6], [6])  # long before the 30 s window
    submitter.enqueue(object())
    submitter.flush_if_due()
    assert submitted == [6]
    time.sleep(EARLY_EVERY + 0.05)
    submitter.flush_if_due()
    assert (asked, submitted) == ([1, 6, 1], [6])  # one is too few for this system


def test_a_system_that_took_nothing_yet_is_asked_again_within_milliseconds() -> None:
    """The rule gives a kind pilots once a few of its units are ready: until the system takes a job, it is asked
    again after 10 ms, then twice as long each time up to 0.2 s, so that the pilots' submission (and their start
    on the cluster) does not wait for the next slice of the hand-out; once it took some, every 0.2 s."""
    from b2batch.engine.submission import EARLY_EVERY, FIRST_EARLY

    submitter, asked, submitted = _taking_three()
    submitter.enqueue(object())
    submitter.flush_if_due()
    assert (asked, submitted) == ([1], [])
    time.sleep(FIRST_EARLY * 1.5)
    submitter.enqueue(object())
    submitter.flush_if_due()  # 10 ms on: asked again, still too few
    time.sleep(2 * FIRST_EARLY * 1.5)
    submitter.enqueue(object())
    submitter.flush_if_due()  # 20 ms on: three, taken
    assert (asked, submitted) == ([1, 2, 3], [3])
    time.sleep(4 * FIRST_EARLY * 1.5)
    submitter.enqueue(object())
    submitter.flush_if_due()
    assert (asked, submitted) == ([1, 2, 3], [3]) and EARLY_EVERY > 4 * FIRST_EARLY * 1.5  # its slices now


def test_jobs_the_system_does_not_take_now_keep_their_window() -> None:
    """A hand-out that mixes units for pilots with jobs for arrays: the units go every 0.2 s, the others wait for
    their window (one array for all of them), not in 0.2 s slices beside the units, nor anew after each."""
    from b2batch.engine.submission import EARLY_EVERY, Submitter

    submitted: list[int] = []

    class Job:
        def __init__(self, unit: bool) -> None:
            self.unit = unit

    def units(waiting) -> list:
        return [job for job in waiting if job.unit]

    window = 2.0
    submitter = Submitter(ArraySystem(submitted, units), lambda job: None, lambda job, message: None,
                          RunConfig(submission_window=window, max_array_size=1000))
    began = time.monotonic()
    for slice_ in range(3):
        for unit in (True, False, False):
            submitter.enqueue(Job(unit))
        submitter.flush_if_due()
        if slice_ < 2:
            time.sleep(EARLY_EVERY + 0.02)
    assert time.monotonic() - began < window, "too slow a machine for this test's window"
    assert submitted == [1, 1, 1] and len(submitter.waiting) == 6  # the units alone, each slice
    time.sleep(max(0.0, began + window + 0.05 - time.monotonic()))
    submitter.flush_if_due()
    # the others in one array, when the window of the first of them ends (not a window from the last slice on)
    assert submitted == [1, 1, 1, 6] and not submitter.waiting


def test_the_shaping_system_takes_units_now_when_the_rule_sends_them_to_pilots(tmp_path: Path) -> None:
    """An unknown kind with MIN_READY units or more is probed in pilots: its units go now. Fewer, a kind forced
    to jobs of their own, or jobs without a unit (a front-end's own wrapper only) wait for their array."""
    from b2batch.engine.pilots.shape_rule import MIN_READY
    from b2batch.engine.pilots.shaping_system import ShapingSystem
    from helpers.simulated import Simulated, make_job

    shaping = ShapingSystem(Run(), Simulated(Run()))

    def jobs(count: int, unit: bool = True, **settings: object) -> list[Job]:
        made = [make_job(tmp_path, f"u{n}", **settings) for n in range(count)]
        for job in made:
            job.unit = {"call": "builtins:print"} if unit else None
        return made

    probed = jobs(MIN_READY)
    assert shaping.takes_now(probed) == probed
    assert shaping.takes_now(jobs(MIN_READY - 1)) == []
    assert shaping.takes_now(jobs(50, job_shape="job_per_task")) == []
    assert shaping.takes_now(jobs(50, unit=False)) == []
    # Mixed: only the kind that goes to pilots goes now, wherever its units wait.
    own = jobs(5, job_shape="job_per_task")
    assert shaping.takes_now([*own, *probed]) == probed
