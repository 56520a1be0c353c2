"""The engine's front-end for Python calls (b2batch.calls.Executor), on local jobs and local pilots."""

from __future__ import annotations

import os
import pickle
import signal
import threading
import time
from pathlib import Path

import pytest

from b2batch.calls import CallJobError, Executor, RemoteTraceback, as_completed
from b2batch.errors import SettingError
from tests.conftest import wait_for


def square(x: int) -> int:
    if x < 0:
        raise ValueError(f"negative: {x}")
    return x * x


def write_pid_and_sleep(folder: str, seconds: float) -> int:
    Path(folder, f"{os.getpid()}.pid").write_text("")
    time.sleep(seconds)
    return os.getpid()


@pytest.mark.parametrize("settings", [{}, {"pilot_jobs": 2}, {"tasks_per_job": 3}], ids=["own", "pilots", "bundles"])
def test_values_come_back_in_order_and_an_exception_with_its_remote_traceback(settings: dict) -> None:
    with Executor("local", name="square", settings=settings) as executor:
        futures = [executor.submit(square, i) for i in (3, -2, 5)]
        batch = executor.submit_calls([(square, (i,), {}) for i in range(4)], label="batch")
        big = executor.submit(bytes, 20_000)  # its pickled value is over calls_on_node.HAND_LIMIT
        given = executor.submit(len, bytes(100_000))  # its pickled call is over pooled_system.INLINE_LIMIT
        assert futures[0].result(timeout=60) == 9 and futures[2].result(timeout=60) == 25
        assert batch.result(timeout=60) == [0, 1, 4, 9] and big.result(timeout=60) == bytes(20_000)
        assert given.result(timeout=60) == 100_000
        error = futures[1].exception(timeout=60)
        work_dir = executor.work_dir
    assert isinstance(error, ValueError) and str(error) == "negative: -2"
    assert isinstance(error.__cause__, RemoteTraceback) and "in square" in error.__cause__.text
    assert any("square #1" in note and "stderr" in note for note in error.__notes__)
    assert work_dir.is_dir(), "a failed call keeps the work dir for its logs"
    # A job of its own keeps its journal (its batch job id, for the user); a unit in a pilot or bundle writes
    # none (no later steering process follows a call), and no call writes a result.json (its result is a pickle)
    units = sorted((work_dir / "jobs").iterdir())
    assert units and not list(work_dir.glob("jobs/*/result.json"))
    journals = list(work_dir.glob("jobs/*/submission.json"))
    assert len(journals) == (len(units) if not settings else 0), journals
    # In a pilot's or bundle's runner a small outcome (a value, an exception) goes to the worker, in its log line,
    # not into result.pkl; a big one and every job of its own write the file
    pickles = list(work_dir.glob("jobs/*/result.pkl"))
    assert len(pickles) == (len(units) if not settings else 1), pickles
    # A unit in a pilot or bundle carries its calls in its queue entry and gets no job folder, no call file and
    # no exit code file (its exit code and outcome are in its worker's line): only the calls over INLINE_LIMIT
    # have their call file (and exit code), and the big outcome's folder was made on the node for result.pkl
    calls, codes = list(work_dir.glob("jobs/*/call.pkl")), list(work_dir.glob("jobs/*/exit_code"))
    if settings:
        assert len(calls) == 1 and len(codes) == 1 and codes[0].parent == calls[0].parent, (calls, codes)
        assert {p.parent for p in [*calls, *pickles]} == set(units), units
    else:
        assert len(calls) == len(codes) == len(units), (calls, codes)


def test_short_calls_are_packed_with_each_value_and_exception_their_own() -> None:
    with Executor("local", name="square") as executor:
        futures = [executor.submit(square, -i if i == 357 else i) for i in range(2000)]
        error = futures[357].exception(timeout=120)
        values = [f.result(timeout=120) for i, f in enumerate(futures) if i != 357]
        jobs = executor.run.record.jobs
        sizes = sorted({f.job.key: int(f.job.name.split("-")[-1]) - int(f.job.name.split("#")[1].split("-")[0]) + 1
                        if "-" in f.job.name else 1 for f in futures}.values())
    assert values == [i * i for i in range(2000) if i != 357]
    assert isinstance(error, ValueError) and str(error) == "negative: -357"
    assert isinstance(error.__cause__, RemoteTraceback) and "in square" in error.__cause__.text
    assert any("square #357" in note and "packed in square #" in note for note in error.__notes__), sorted({f.job.name for f in futures})
    assert len(jobs) < 40 and sizes[:2] == [1, 1] and sizes[-1] >= 100, f"packs of {sizes}"


def test_an_explicit_pack_size_wins() -> None:
    with Executor("local", name="square", pack=3) as executor:
        futures = [executor.submit(square, i) for i in range(10)]
        assert [f.result(timeout=60) for f in futures] == [i * i for i in range(10)]
    assert [f.job.name for f in futures[::3]] == ["square #0-2", "square #3-5", "square #6-8", "square #9"]
    with Executor("local", name="square", pack=1) as executor:
        futures = [executor.submit(square, i) for i in range(3)]
        assert [f.result(timeout=60) for f in futures] == [0, 1, 4]
    assert len({f.job.key for f in futures}) == 3


def test_the_executor_keeps_serving_after_its_only_call_was_cancelled(tmp_path: Path) -> None:
    with Executor("local") as executor:
        sleeping = executor.submit(time.sleep, 60)
        wait_for(lambda: executor.in_flight() == 1 and executor._requests.empty(), 30, "the call to be submitted")
        assert sleeping.cancel()
        time.sleep(0.5)  # the executor's thread takes the cancel while nothing else is in flight
        assert executor.submit(square, 4).result(timeout=60) == 16


def test_the_work_dir_is_removed_when_every_call_succeeded(tmp_path: Path) -> None:
    with Executor("local", name="ok", work_dir=tmp_path / "work") as executor:
        assert [f.result(timeout=60) for f in as_completed([executor.submit(square, 2)])] == [4]
    assert not (tmp_path / "work").exists()


def test_a_lambda_and_a_closure_travel_by_value() -> None:
    offset = 7
    with Executor("local") as executor:
        assert executor.submit(lambda x: x + offset, 1).result(timeout=60) == 8


def test_a_job_killed_from_outside_is_submitted_again_then_reported(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    with Executor("local", settings={"max_resubmissions": 1}) as executor:
        future = executor.submit(write_pid_and_sleep, str(pids), 60)
        for attempt in (1, 2):
            pid_file = wait_for(lambda: [p for p in pids.iterdir() if p.suffix == ".pid"], 60,
                                f"attempt {attempt} to start")[0]
            os.killpg(os.getpgid(int(pid_file.stem)), signal.SIGKILL)  # the whole job, as a scheduler kills it
            pid_file.unlink()
        error = future.exception(timeout=60)
    assert isinstance(error, CallJobError)
    message = str(error)
    assert "on local" in message and "stderr" in message and "killed" in message.lower()


def test_cancelling_a_future_cancels_its_job(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    with Executor("local") as executor:
        future = executor.submit(write_pid_and_sleep, str(pids), 60)
        pid = int(wait_for(lambda: list(pids.iterdir()), 60, "the call to start")[0].stem)
        assert future.cancel()
        wait_for(lambda: not _alive(pid), 30, "the cancelled call's process to end")


def test_shutdown_with_cancel_stops_every_job_and_nothing_waits(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    executor = Executor("local", settings={"local_slots": 2})
    futures = [executor.submit(write_pid_and_sleep, str(pids), 60) for _ in range(4)]
    wait_for(lambda: len(list(pids.iterdir())) == 2, 60, "two calls to start")
    started = time.monotonic()
    executor.shutdown(cancel_futures=True)
    assert time.monotonic() - started < 30
    assert all(f.cancelled() for f in futures)
    wait_for(lambda: not any(_alive(int(p.stem)) for p in pids.iterdir()), 30, "the calls' processes to end")


def test_a_call_that_cannot_be_pickled_raises_at_once_naming_it() -> None:
    with Executor("local") as executor, pytest.raises(pickle.PicklingError, match="square"):
        executor.submit(square, threading.Lock())


def test_a_value_that_cannot_be_pickled_is_a_clear_error() -> None:
    with Executor("local") as executor:
        error = executor.submit(threading.Lock).exception(timeout=60)
    assert isinstance(error, pickle.PicklingError) and "could not be pickled" in str(error)


def test_an_unknown_or_wrong_setting_is_one_clear_error() -> None:
    with pytest.raises(SettingError, match="Unknown setting 'max_resubmision'.*Did you mean 'max_resubmissions'"):
        Executor("local", name="fit", settings={"max_resubmision": 3})
    with pytest.raises(SettingError, match="fit.*max_resubmissions"):
        Executor("local", name="fit", settings={"max_resubmissions": "many"})
    with pytest.raises(SettingError, match="Unknown batch_system 'slrum'"):
        Executor("slrum")


def test_a_missing_executable_fails_the_call_with_the_fix(tmp_path: Path) -> None:
    with Executor("local", settings={"executable": ["/no/such/python"]}) as executor:
        error = executor.submit(square, 2).exception(timeout=60)
    assert isinstance(error, CallJobError) and "executable" in str(error) and "127" in str(error)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie of this test process's children counts as ended
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False
