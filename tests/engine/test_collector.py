"""Python's collector while a run steers (engine/collector.py): a unit's objects die young, and the thresholds
the process had come back when the last run that steers stops."""

from __future__ import annotations

import gc
import threading
from collections import deque
from collections.abc import Iterator
from pathlib import Path

import pytest

from b2batch.engine import Run, collector
from b2batch.engine.steering import Step, Steering, drive

DEFAULT = (700, 10, 10)


@pytest.fixture(autouse=True)
def thresholds() -> Iterator[None]:
    kept = gc.get_threshold()
    gc.set_threshold(*DEFAULT)
    yield
    gc.set_threshold(*kept)


def test_while_a_run_steers_the_first_threshold_is_raised_and_comes_back_after() -> None:
    with collector.steering():
        assert gc.get_threshold() == (collector.STEERING_THRESHOLD, 10, 10)
    assert gc.get_threshold() == DEFAULT


def test_the_thresholds_come_back_when_the_last_of_several_runs_stops() -> None:
    first, second = collector.steering(), collector.steering()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert gc.get_threshold()[0] == collector.STEERING_THRESHOLD  # the second still steers
    second.__exit__(None, None, None)
    assert gc.get_threshold() == DEFAULT


def test_thresholds_the_program_sets_while_a_run_steers_are_its_own_and_stay() -> None:
    with collector.steering():
        gc.set_threshold(1234, 5, 6)
    assert gc.get_threshold() == (1234, 5, 6)


@pytest.mark.parametrize("own", [(0, 10, 10), (100_000, 10, 10)], ids=["collection off", "higher already"])
def test_a_program_whose_collector_is_off_or_rarer_already_keeps_it(own: tuple[int, int, int]) -> None:
    gc.set_threshold(*own)
    with collector.steering():
        assert gc.get_threshold() == own
    assert gc.get_threshold() == own


def test_objects_that_live_as_long_as_a_unit_in_flight_are_not_collected_again_and_again() -> None:
    """What a run in flight does: each unit's objects live while a few thousand later units' are made. With the
    default thresholds they are promoted and the older generations are collected over and over; while steering,
    they die young."""

    def older_collections() -> int:
        counts = [0]

        def count(phase: str, info: dict) -> None:
            if phase == "start" and info["generation"] > 0:
                counts[0] += 1

        gc.callbacks.append(count)
        try:
            in_flight: deque[list[dict[str, int]]] = deque()
            for burst in range(60):  # units go out in bursts and come back a few thousand later
                in_flight.extend([{"unit": number}, {"files": number}] for number in range(1_000))
                while len(in_flight) > 3_000:
                    in_flight.popleft()  # it ended
        finally:
            gc.callbacks.remove(count)
        return counts[0]

    assert older_collections() > 5
    with collector.steering():
        assert older_collections() == 0


class _Once(Steering):
    def __init__(self) -> None:
        self.seen: tuple[int, int, int] | None = None

    def feed(self) -> None:
        self.seen = gc.get_threshold()

    def step(self, ended: int) -> Step:
        return Step.STOP


def test_the_engines_one_loop_steers_with_the_raised_threshold(tmp_path: Path) -> None:
    run = Run()
    steering = _Once()
    thread = threading.Thread(target=drive, args=(run, steering))  # as an executor's thread drives its run
    thread.start()
    thread.join(30)
    run.close()
    assert steering.seen is not None and steering.seen[0] == collector.STEERING_THRESHOLD
    assert gc.get_threshold() == DEFAULT
