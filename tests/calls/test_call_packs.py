"""Short calls packed into shared units (issue 44, must-have 2): the sizer, the packs, and a pack's node side,
without a job (the executor's packs on local jobs are in test_calls.py)."""

from __future__ import annotations

import concurrent.futures
import pickle
from pathlib import Path
from types import SimpleNamespace

import pytest

from b2batch.calls.call_packs import CallPack, WaitingCalls, deliver
from b2batch.calls.calls_on_node import PackOutcome, run_pack
from b2batch.calls.executor import RemoteTraceback
from b2batch.calls.pack_sizing import GROWTH, MAX_PACK, PROBE_PATIENCE, PROBES, TARGET_SECONDS, PackSizer


def square(x: int) -> int:
    if x < 0:
        raise ValueError(f"negative: {x}")
    return x * x


def sizes(sizer: PackSizer, count: int, waiting: int | None = None) -> list[int]:
    return [sizer.next_size(waiting) for _ in range(count)]


def test_the_pack_grows_for_short_calls_up_to_the_target_time() -> None:
    sizer = PackSizer()
    assert sizer.probing and sizes(sizer, 2) == [1, 1]  # nothing timed: probes of one call
    sizer.timed(1, 100e-6)  # a call of 100 microseconds
    grown = sizes(sizer, 5)
    full = int(TARGET_SECONDS / 100e-6)
    assert GROWTH ** 3 < full < GROWTH ** 4
    assert grown == [GROWTH, GROWTH ** 2, GROWTH ** 3, full, full], "grows, by at most GROWTH a pack, to the target"
    assert 0.9 * TARGET_SECONDS <= grown[-1] * 100e-6 <= TARGET_SECONDS
    free = PackSizer()
    free.timed(1000, 0.0)  # calls too short to time: packs grow to the most a pack holds
    assert sizes(free, 6)[-2:] == [MAX_PACK, MAX_PACK]


def test_the_pack_stays_one_call_for_long_calls() -> None:
    sizer = PackSizer()
    sizer.timed(1, 1.5)
    assert sizes(sizer, 5) == [1] * 5
    patient = PackSizer()
    patient.running_long(PROBE_PATIENCE / 2)
    assert patient.probing, "a probe running briefly says nothing yet"
    patient.running_long(PROBE_PATIENCE + 1)
    assert not patient.probing and sizes(patient, 3) == [1, 1, 1]
    patient.timed(1, 100e-6)  # the probe ended: its time was mostly its job's start-up
    assert sizes(patient, 2) == [GROWTH, GROWTH ** 2], "a measured time replaces the guess"


def test_a_pack_leaves_work_for_a_second_unit_and_an_explicit_size_wins() -> None:
    sizer = PackSizer()
    sizer.timed(1, 1e-6)
    sizer.largest = MAX_PACK
    assert sizer.next_size(waiting=100, spread=2) == 50
    fixed = PackSizer(fixed=7)
    fixed.timed(1, 1e-6)
    assert not fixed.probing and sizes(fixed, 3, waiting=1000) == [7, 7, 7]
    with pytest.raises(ValueError):
        PackSizer(fixed=0)


def _waiting(count: int, sizer: PackSizer) -> tuple[WaitingCalls, list[concurrent.futures.Future]]:
    calls = WaitingCalls(sizer)
    futures = []
    for number in range(count):
        future = concurrent.futures.Future()
        future.number = number
        futures.append(future)
        calls.add(pickle.dumps([(square, (number,), {})]), future)
    return calls, futures


def test_only_the_probes_go_out_until_a_call_was_timed_then_packs_in_order() -> None:
    sizer = PackSizer()
    calls, futures = _waiting(100, sizer)
    probes = list(calls.packs(probes_out=0, closing=False))
    assert [(len(members), probe) for members, probe in probes] == [(1, True)] * PROBES
    assert list(calls.packs(probes_out=PROBES, closing=False)) == []
    sizer.timed(1, 1e-6)
    futures[5].cancel()
    packs = list(calls.packs(probes_out=0, closing=True))
    numbers = [future.number for members, _probe in packs for _payload, future in members]
    assert numbers == [n for n in range(PROBES, 100) if n != 5], "every call once, in order, not the cancelled one"
    assert len(packs) < 10 and not any(probe for _members, probe in packs)


def test_each_call_of_a_pack_gets_its_own_value_or_exception(tmp_path: Path) -> None:
    payloads = [pickle.dumps([(square, (x,), {})]) for x in (2, -3, 4)]
    (tmp_path / "call.pkl").write_bytes(pickle.dumps(payloads))
    assert run_pack(str(tmp_path / "call.pkl"), str(tmp_path / "result")) == 0
    pack_outcome = pickle.loads((tmp_path / "result").read_bytes())
    assert isinstance(pack_outcome, PackOutcome) and len(pack_outcome.outcomes) == 3
    futures = []
    for number in (10, 11, 12):
        future = concurrent.futures.Future()
        future.number = number
        futures.append(future)
    job = SimpleNamespace(name="calls #10-12", system="local", job_id="7", files=SimpleNamespace(stderr="/x/stderr"))
    failures = deliver("calls", job, CallPack(futures, packed=True), pack_outcome.outcomes, RemoteTraceback)
    assert futures[0].result() == 4 and futures[2].result() == 16
    error = futures[1].exception()
    assert isinstance(error, ValueError) and str(error) == "negative: -3"
    assert isinstance(error.__cause__, RemoteTraceback) and "in square" in error.__cause__.text
    assert any("calls #11" in note and "calls #10-12" in note and "/x/stderr" in note for note in error.__notes__)
    assert failures == ["call #11 raised ValueError: negative: -3"]


def test_the_executors_loop_polls_again_at_once_after_jobs_ended() -> None:
    """What ended may let calls go (the probes' times size the packs that wait): the executor's thread polls
    again at once instead of pausing; with nothing ended it pauses, and it stops once closing and idle."""
    from b2batch.calls.executor import _ExecutorSteering
    from b2batch.engine.steering import Step

    executor = SimpleNamespace(_futures={1: None}, _waiting=[], _requests=SimpleNamespace(empty=lambda: True))
    steering = _ExecutorSteering(executor)  # type: ignore[arg-type]
    assert steering.step(2) is Step.AGAIN and steering.step(0) is Step.WAIT
    steering.closing = True
    assert steering.step(0) is Step.WAIT  # a call is still in flight
    executor._futures = {}
    assert steering.step(1) is Step.STOP
