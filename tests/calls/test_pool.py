"""b2batch.Pool on local jobs: multiprocessing.Pool's semantics, resubmission of killed jobs, the throttle,
the environment, the work dir (kept on failure, removed on success, small whatever N), and the
multiprocessing fallback. Real Slurm and SGE, the emulators and pypoolparty's class paths:
tests/calls/test_pool_systems.py."""

from __future__ import annotations

import json
import multiprocessing
import multiprocessing.pool
import os
import signal
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

import b2batch
from b2batch.calls import RemoteTraceback
from b2batch.engine.pilots.work_queue import DRAIN_GRACE
from b2batch.pool import PoolJobLostError, environment, packing
from tests.conftest import wait_for


def square(x: int) -> int:
    if x == 7:
        raise ValueError(f"seven is not allowed: {x}")
    return x * x


def unpicklable(x: int) -> object:
    return threading.Lock() if x == 2 else x


def note_times(folder: str, x: int, seconds: float) -> int:
    start = time.time()
    time.sleep(seconds)
    Path(folder, f"{x}.json").write_text(json.dumps([start, time.time()]))
    return x


def wait_to_be_killed(folder: str, x: int) -> int:
    """Sleeps in its first attempts (a pid file says which process to kill); returns at once once the test
    has killed as many as the file ``kills`` allows."""
    allowed = int(Path(folder, "kills").read_text())
    attempts = len(list(Path(folder).glob("*.pid"))) + len(list(Path(folder).glob("*.killed")))
    if attempts >= allowed:
        return x
    # in a pilot, its parent is the worker; written whole before the test can see it (rename)
    Path(folder, f"{os.getpid()}.part").write_text(str(os.getppid()))
    Path(folder, f"{os.getpid()}.part").rename(Path(folder, f"{os.getpid()}.pid"))
    time.sleep(120)
    return x


def variable(name: str) -> str | None:
    return os.environ.get(name)


def local_pool(**options: object) -> b2batch.Pool:
    options.setdefault("batch_system", "local")
    options.setdefault("verbose", False)
    return b2batch.Pool(**options)


def test_map_starmap_imap_and_apply_equal_those_of_multiprocessing() -> None:
    inputs = [list(range(9)), [], [5]]
    with multiprocessing.Pool(2) as reference, local_pool() as pool:
        for items in inputs:
            for chunksize in (None, 1, 4):
                expected = reference.map(abs, items, chunksize)
                assert pool.map(abs, items, chunksize) == expected, (items, chunksize)
        pairs = [(2, 3), (3, 2), (10, 0)]
        assert pool.starmap(pow, pairs, 2) == reference.starmap(pow, pairs, 2)
        assert pool.starmap(pow, []) == reference.starmap(pow, []) == []
        assert list(pool.imap(abs, iter(range(-5, 5)), chunksize=3)) == list(reference.imap(abs, range(-5, 5), 3))
        assert list(pool.imap(abs, iter([]))) == []
        unordered = reference.imap_unordered(abs, range(-4, 4), 2)
        assert sorted(pool.imap_unordered(abs, range(-4, 4), 2)) == sorted(unordered)
        result = pool.map_async(abs, [-1, -2], callback=lambda values: values.append("called"))
        assert result.get(timeout=60) == [1, 2, "called"] and result.ready() and result.successful()
        assert pool.apply(divmod, (7, 2)) == reference.apply(divmod, (7, 2))
        assert pool.apply_async(int, ("ff",), {"base": 16}).get(60) == 255
        with pytest.raises(ValueError, match="Chunksize"):
            pool.map(abs, [1], chunksize=0)
    with pytest.raises(ValueError, match="not running"):
        pool.map(abs, [1])


def test_an_unpicklable_result_is_a_clear_error_as_in_multiprocessing() -> None:
    with multiprocessing.Pool(2) as reference:
        with pytest.raises(multiprocessing.pool.MaybeEncodingError):
            reference.map(unpicklable, range(4))
    with local_pool() as pool:
        with pytest.raises(multiprocessing.pool.MaybeEncodingError, match="item 2 cannot be pickled"):
            pool.map(unpicklable, range(4), chunksize=4)


def test_an_exception_raises_in_the_caller_with_its_type_index_and_traceback() -> None:
    with local_pool() as pool:
        with pytest.raises(ValueError, match="seven is not allowed") as raised:
            pool.map(square, range(10), chunksize=3)
        error = raised.value
        assert isinstance(error.__cause__, RemoteTraceback) and "in square" in error.__cause__.text
        assert any("item 7 of map(square)" in note for note in error.__notes__), error.__notes__
        values = pool.imap(square, range(9), chunksize=2)
        assert [next(values) for _ in range(7)] == [0, 1, 4, 9, 16, 25, 36]
        with pytest.raises(ValueError):
            next(values)  # item 7 raises at its place, and the iteration goes on after it
        assert list(values) == [64]
        failed = pool.apply_async(square, (7,), error_callback=lambda e: None)
        failed.wait(60)
        assert failed.ready() and not failed.successful()
        work_dir = pool.work_dir
    assert work_dir.is_dir(), "a failed item keeps the work dir"
    lines = packing.read_outputs(work_dir)
    assert any(line["state"] == "failed" and "seven" in line["error"] for line in lines)


def kill_attempts(folder: Path, count: int, pilot: bool = False) -> None:
    for attempt in range(count):
        pid_file = wait_for(lambda: list(folder.glob("*.pid")), 60, f"attempt {attempt + 1} to start")[0]
        if pilot:  # its pilot job, cancelled from outside as scancel would (SIGTERM well before its walltime)
            os.kill(int(pid_file.read_text()), signal.SIGTERM)
        else:  # the task's process, as an out-of-memory killer would
            os.kill(int(pid_file.stem), signal.SIGKILL)
        pid_file.rename(pid_file.with_suffix(".killed"))


@pytest.mark.parametrize("shape", ["job_per_task", "pilots"])
@pytest.mark.parametrize("kills", [1, 2], ids=["resubmitted-then-done", "reported-at-the-limit"])
def test_a_job_killed_from_outside_is_resubmitted_up_to_the_limit_then_reported(
        tmp_path: Path, kills: int, shape: str) -> None:
    """A chunk's job killed, or its pilot job cancelled from outside while it runs the chunk: submitted again
    within max_num_resubmissions, then a RuntimeError, whichever the job shape."""
    folder = tmp_path / "marks"
    folder.mkdir()
    (folder / "kills").write_text(str(kills))
    with local_pool(max_num_resubmissions=1, polling_interval=0.2, settings={"job_shape": shape}) as pool:
        result = pool.starmap_async(wait_to_be_killed, [(str(folder), 5)])
        kill_attempts(folder, kills, pilot=shape == "pilots")
        if kills == 1:
            assert result.get(timeout=60) == [5]
        else:
            with pytest.raises(RuntimeError, match="after 1 resubmission") as raised:
                result.get(timeout=60)
            assert isinstance(raised.value, PoolJobLostError)
            assert ("killed by SIGKILL" if shape == "job_per_task" else "its pilot job") in str(raised.value)
        records = list(pool.record.jobs.values())
    assert [len(r.resubmissions) for r in records] == [1]
    assert all(bool(r.carrier) == (shape == "pilots") for r in records)


def test_the_throttle_holds_from_start_to_end(tmp_path: Path) -> None:
    with local_pool(num_simultaneously_running_tasks=2, settings={"local_slots": 6}) as pool:
        assert pool.starmap(note_times, [(str(tmp_path), x, 1.0) for x in range(6)], chunksize=1) == list(range(6))
    spans = [json.loads((tmp_path / f"{x}.json").read_text()) for x in range(6)]
    overlap = max(sum(start <= t < end for start, end in spans) for t, _ in spans)
    assert overlap == 2, spans


def test_a_main_function_a_lambda_and_a_closure_run_and_the_summary_shows(workflow) -> None:
    script = workflow("pool_main.py")
    done = script.run("--verbose", env={**os.environ, "POOL_MAIN_VARIABLE": "crossed"}, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert results == {"cube": [0, 1, 8, 27, 64], "lambda": [2, 3], "closure": [101, 102], "variable": "crossed"}
    assert "b2batch summary" in done.stderr and "map(cube)" in done.stderr
    assert not list((script.folder / "pool_work").iterdir()), "removed on success"


def test_the_environment_is_exported_without_the_schedulers_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POOL_TEST_VARIABLE", "it's here")
    monkeypatch.setenv("SLURM_JOB_ID", "999999")
    exported = environment.exported(extra={"OMP_NUM_THREADS": 1})
    assert exported["POOL_TEST_VARIABLE"] == "it's here" and exported["OMP_NUM_THREADS"] == "1"
    assert not {"SLURM_JOB_ID", "PWD", "SHLVL", "_", "JOB_ID", "TMPDIR"} & set(exported)
    with local_pool(settings={"env": {"POOL_SET_VARIABLE": "set"}}) as pool:
        # Local jobs inherit this process's environment anyway: the job's wrapper is what exports it (here the
        # wrappers of the pilots the Pool started when it was made, which run the two chunks).
        wrappers: list[str] = []
        result = pool.map_async(variable, ["POOL_TEST_VARIABLE", "POOL_SET_VARIABLE"], chunksize=1)
        while not result.ready():
            # (a wrapper being written reads empty; a job's folder goes as soon as its values are taken)
            for path in pool.work_dir.glob("**/jobs/*/executable_wrapper.sh"):
                try:
                    if text := path.read_text():
                        wrappers.append(text)
                except FileNotFoundError:
                    continue
        assert result.get() == ["it's here", "set"]
    assert wrappers and "export POOL_TEST_VARIABLE='it'\"'\"'s here'" in wrappers[0]
    assert "SLURM_JOB_ID" not in wrappers[0] and "export PWD=" not in wrappers[0]


def test_the_work_dir_is_removed_on_success_and_kept_when_asked(tmp_path: Path) -> None:
    with local_pool(work_dir=tmp_path / "a") as pool:
        assert pool.map(abs, [-1]) == [1]
    assert list((tmp_path / "a").iterdir()) == []
    with local_pool(work_dir=tmp_path / "b", keep_work_dir=True) as pool:
        pool.map(abs, [-1])
        work_dir = pool.work_dir
    # (its one item ran in a pilot the Pool started when it was made: their queue stays with the work dir)
    assert sorted(p.name for p in work_dir.iterdir()) == ["_pilots", "logs", "outputs.jsonl", "results.pickles",
                                                          "shipped"]
    [line] = packing.read_outputs(work_dir)
    assert line["state"] == "done" and line["count"] == 1
    [answer] = packing.read_answers(work_dir)
    assert answer["answer"].values == [1]


def talk(x: int) -> int:
    print(f"out {x}")
    print(f"err {x}", file=sys.stderr)
    return x


def test_chunks_in_pilots_write_into_their_pilots_logs_and_the_outputs_quote_each_chunks_part(tmp_path: Path) -> None:
    """unit_logs auto: a chunk in a pilot gets no log folder; outputs.jsonl quotes its part of the pilot's logs
    (stdout with the line naming it, as its own log file would be; stderr what it wrote alone), and a map that
    wrote nothing to stderr still removes the work dir (the naming line in the pilot's stderr does not count)."""
    with local_pool(work_dir=tmp_path / "w", keep_work_dir=True, settings={"job_shape": "pilots"}) as pool:
        assert pool.map(talk, range(6), chunksize=1) == list(range(6))
        work_dir, records = pool.work_dir, list(pool.record.jobs.values())
    assert len(records) == 6 and all("pilots" in Path(r.logs).parts for r in records), [r.logs for r in records]
    lines = packing.read_outputs(work_dir)
    assert sorted(line["start"] for line in lines) == list(range(6))
    for line in lines:
        x = line["start"]
        assert line["stdout"].startswith("b2batch: ") and line["stdout"].endswith(f"out {x}\n"), line
        assert line["stderr"] == f"err {x}\n", line
    assert not list(work_dir.glob("logs/0*")), "a log folder per chunk"
    with local_pool(work_dir=tmp_path / "quiet", settings={"job_shape": "pilots"}) as pool:
        assert pool.map(abs, range(-3, 3), chunksize=1) == [3, 2, 1, 0, 1, 2]
    assert list((tmp_path / "quiet").iterdir()) == []


def test_the_packed_line_of_a_failed_chunk_is_written_when_its_error_is_raised(tmp_path: Path, monkeypatch) -> None:
    """The packed files are written out once per burst of ended jobs, but a failure's at once, before its error
    reaches the caller (whose note names the file); every ended chunk's line is there once the pool is closed."""
    from b2batch.pool import results

    seen: list[list[int]] = []  # the chunks packed in outputs.jsonl when a failure is handed to the result
    work: list[Path] = []
    fail = results.AsyncResult.fail

    def failing(self, start: int, end: int, error: BaseException) -> None:
        seen.append([line["start"] for line in packing.read_outputs(work[0])])
        fail(self, start, end, error)

    monkeypatch.setattr(results.AsyncResult, "fail", failing)
    with local_pool(work_dir=tmp_path / "w", keep_work_dir=True) as pool:
        work.append(pool.work_dir)
        with pytest.raises(ValueError, match="seven is not allowed") as raised:
            pool.map(square, range(10), chunksize=1)
        packed = [line for line in packing.read_outputs(pool.work_dir) if line["start"] == 7]
        assert len(packed) == 1 and "seven is not allowed" in packed[0]["error"], packed
        assert str(pool.work_dir / "outputs.jsonl") in "\n".join(raised.value.__notes__)
        assert seen and all(7 in chunks for chunks in seen), seen
        work_dir, record = pool.work_dir, pool.record
    # Once the pool is closed, every chunk that ended has its line, once (those still running when the map
    # failed were cancelled with it: how many did depends on the machine's speed)
    starts = sorted(line["start"] for line in packing.read_outputs(work_dir))
    ended = [job for job in record.jobs.values() if job.state in ("done", "failed")]
    assert len(set(starts)) == len(starts) == len(ended) and 7 in starts, (starts, [j.state for j in ended])


def files_while_mapping(tmp_path: Path, count: int) -> tuple[int, int]:
    """The most files the work dir held while mapping ``count`` items one per job, and the number left. (A job
    each: with the default job_shape, 24 chunks of one trivial item go to pilots, whose queue folder stays.)"""
    most = 0
    with local_pool(work_dir=tmp_path / str(count), keep_work_dir=True, num_simultaneously_running_tasks=2,
                    settings={"job_shape": "job_per_task"}) as pool:
        result = pool.map_async(abs, range(count), chunksize=1)
        while not result.ready():
            most = max(most, packing.file_count(pool.work_dir))
            time.sleep(0.05)
        assert result.get() == list(range(count))
        work_dir = pool.work_dir
    return most, packing.file_count(work_dir)


def test_the_work_dir_file_count_does_not_grow_with_the_items(tmp_path: Path) -> None:
    small, large = files_while_mapping(tmp_path, 4), files_while_mapping(tmp_path, 24)
    assert large[1] == small[1] == 7, ("after the map: outputs.jsonl, results.pickles, empty jobs/, logs/ with the "
                                       "pool's live state (b2batch monitor), and shipped/ with the map's function")
    assert large[0] <= 40, f"at most the window's jobs (4) in flight, not 24: {large[0]} files"


def test_a_maps_first_chunk_does_not_get_a_job_of_its_own_when_many_follow() -> None:
    with local_pool() as pool:
        assert pool.map(abs, range(-200, 200), chunksize=10) == [abs(i) for i in range(-200, 200)]
        records = list(pool.record.jobs.values())
    assert len(records) == 40 and all(r.carrier for r in records), [r.task_id for r in records if not r.carrier]


def test_a_local_pools_pilots_start_when_it_is_made_wait_and_run_its_first_map(tmp_path: Path) -> None:
    """As multiprocessing.Pool's processes start when it is made, so do a local Pool's pilots (as many as its
    first units' probes get): they wait past the drain grace for the first map, and run it; no other pilot
    starts. They end with the Pool."""
    with local_pool(work_dir=tmp_path) as pool:
        beats = lambda: list(tmp_path.glob("*/_pilots/*/workers/*.json"))  # noqa: E731
        wait_for(lambda: len(beats()) == 2, 20, "the pilots to start")
        time.sleep(DRAIN_GRACE + 0.5)
        assert len(beats()) == 2 and len(pool.record.worker_jobs) == 2
        assert pool.map(abs, range(-50, 50), chunksize=5) == [abs(i) for i in range(-50, 50)]
        pilots = {entry["job_id"] for entry in pool.record.worker_jobs.values()}
        assert len(pilots) == 2 and all(record.job_ids[-1] in pilots for record in pool.record.jobs.values())
        work_dir = pool.work_dir
    assert not work_dir.exists() and not [p for p in psutil.process_iter(["cmdline"])
                                           if str(tmp_path) in " ".join(p.info["cmdline"] or [])]


def test_a_failed_map_holds_back_no_chunks_for_the_job_shaping() -> None:
    """The chunks of a map that failed are never handed over: they no longer count as ready, or a later lone
    call would be shaped as if hundreds of units came with it."""
    with local_pool(num_simultaneously_running_tasks=1) as pool:
        with pytest.raises(ValueError, match="seven"):
            pool.map(square, range(7, 400), chunksize=1)
        assert pool._dispatcher.held() == 0


def naps(x: int) -> int:
    time.sleep(0.4)
    return x


def test_imap_of_an_input_without_length_packs_short_items_and_not_long_ones() -> None:
    with local_pool() as pool:
        assert list(pool.imap(abs, iter(range(-1000, 1000)))) == [abs(i) for i in range(-1000, 1000)]
        short = len(pool.record.jobs)
        assert sorted(pool.imap_unordered(naps, iter(range(6)))) == list(range(6))
        long = len(pool.record.jobs) - short
    assert short < 20, f"2,000 trivial items in {short} chunks"
    assert long == 6, "items of 0.4 s (more than a unit's target time) one per chunk"


def test_batch_system_multiprocessing_is_a_multiprocessing_pool() -> None:
    with b2batch.Pool(2, batch_system="multiprocessing") as pool:
        assert isinstance(pool, multiprocessing.pool.Pool)
        assert pool.map(abs, [-1, -2]) == [1, 2]
