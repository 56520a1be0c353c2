"""The work queue on the shared file system and the node-side worker that serves it, tested for real: claims
by concurrent processes, and worker processes (``python -m b2batch.engine.pilots.node_worker spec.json``) whose units
are real child processes that print, crash, sleep, get cancelled, and are signalled.

The helper units live in ``tests/engine/pilots/workqueue_units.py`` (the worker finds them through ``PYTHONPATH``).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import wait_for

from b2batch.engine.pilots.worker_lease import JOB_ID_VARIABLES
from b2batch.engine.pilots.queue_folder import log_lines, write_batch
from b2batch.engine.pilots.unit_pool import BATCH_SECONDS, MAX_BATCH, UnitPool
from b2batch.engine.pilots.work_queue import WorkQueue

UNITS = Path(__file__).resolve().parent  # workqueue_units.py and unitrunner_units.py
REPO = Path(__file__).resolve().parents[2]

#: heartbeat_timeout for the workers under test: a beat (and a look for cancellations and revocations)
#: every 0.2 s, the lease lost after 0.6 s without a written beat.
HEARTBEAT = 1.2


def gone(process: psutil.Process) -> bool:
    try:
        return not process.is_running() or process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


# --- the queue alone --------------------------------------------------------------------------------------


def _claimer(root: str, worker: str, barrier: Any, results: Any) -> None:
    """One claiming process: claim batches until the steering side said stop and nothing waits; report the
    units of its claims."""
    try:
        queue = WorkQueue(root)
        queue.join(worker)
        barrier.wait(timeout=30)
        names: list[str] = []
        wrong: list[str] = []
        while True:
            stopping = queue.stopping()  # read before the claim: every put came before it
            claimed = queue.claim(worker)
            if claimed is not None:
                for name, unit in claimed[1]:
                    names.append(name)
                    if unit != {"unit": name}:
                        wrong.append(name)
                continue
            if stopping and not queue.waiting_batches():
                break
            time.sleep(0.001)
        results.put((worker, names, wrong, None))
    except BaseException:
        results.put((worker, [], [], traceback.format_exc()))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(initial=st.integers(1, 200), late=st.integers(0, 40), workers=st.integers(2, 4), size=st.integers(1, 9),
       taken_back=st.sets(st.integers(0, 239), max_size=25))
def test_concurrent_claims_take_every_unit_exactly_once(initial: int, late: int, workers: int, size: int,
                                                        taken_back: set[int]) -> None:
    """Processes that claim batches from one queue at once, while the steering side queues more batches and
    takes single units of them back: no unit is claimed twice, and every unit is either claimed once or taken
    back while its batch waited."""
    context = multiprocessing.get_context("fork")
    with tempfile.TemporaryDirectory() as folder:
        queue = WorkQueue(Path(folder) / "queue")
        queue.create()
        names = [f"{i:06d}" for i in range(initial + late)]
        batches = [names[i:i + size] for i in range(0, len(names), size)]
        early = [batch for batch in batches if batch[0] < names[initial - 1]] or batches[:1]
        for batch in early:
            queue.put_batch(f"b{batch[0]}", [(name, {"unit": name}) for name in batch])
        barrier = context.Barrier(workers + 1)
        results = context.Queue()
        processes = [context.Process(target=_claimer, args=(str(queue.root), f"w{i}", barrier, results))
                     for i in range(workers)]
        for process in processes:
            process.start()
        try:
            barrier.wait(timeout=30)
            removed = set()
            for batch in batches[len(early):]:  # the steering side, racing the claimers
                queue.put_batch(f"b{batch[0]}", [(name, {"unit": name}) for name in batch])
            for i, name in enumerate(names):
                if i in taken_back and queue.take_back(name):
                    removed.add(name)
            queue.finish_all()
            reports = [results.get(timeout=60) for _ in processes]
        finally:
            for process in processes:
                process.join(timeout=30)
                if process.is_alive():
                    process.kill()
        errors = [error for _, _, _, error in reports if error]
        assert not errors, errors[0]
        claimed = [name for _, got, _, _ in reports for name in got]
        twice = {name: n for name, n in Counter(claimed).items() if n > 1}
        assert not twice, f"claimed more than once: {twice}"
        assert not [name for _, _, wrong, _ in reports for name in wrong], "a claim read another unit's file"
        assert not set(claimed) & removed, "a unit was both taken back and claimed"
        assert sorted(set(claimed) | removed) == names
        # The file system agrees with what each process says it claimed.
        assert queue.waiting() == [] and queue.waiting_batches() == []
        assert queue.claims() == {name: worker for worker, got, _, _ in reports for name in got}


def test_log_lines_are_read_whole_and_a_line_cut_short_is_left_out(tmp_path: Path) -> None:
    """A worker's log is read in one decoder call while every line is one JSON value; a line cut short (its worker
    killed while writing it), or lines that are JSON only when joined, fall back to line by line."""
    log = tmp_path / "w.jsonl"
    log.write_bytes(b'{"a": 1}\n\n{"b": 2}\n{"c": 3')  # the last line is still being written
    found, offset = log_lines(log, 0)
    assert found == [{"a": 1}, {"b": 2}] and offset == len(b'{"a": 1}\n\n{"b": 2}\n')
    assert log_lines(log, offset) == ([], offset)
    with open(log, "ab") as f:
        f.write(b'}\n{"d": [1\n2]}\n1, 2\n{"e": 5}\n')
    found, end = log_lines(log, offset)
    assert found == [{"c": 3}, {"e": 5}] and end == log.stat().st_size
    assert log_lines(tmp_path / "none.jsonl", 0) == ([], 0)


def test_queue_steering_and_worker_sides(tmp_path: Path) -> None:
    queue = WorkQueue(tmp_path / "q")
    queue.create()
    queue.put_batch("b1", [(name, {"unit": name}) for name in ("a", "b", "c")])
    queue.put("d", {"unit": "d"})
    assert queue.waiting() == ["a", "b", "c", "d"] and queue.waiting_batches() == ["b1", "d"]
    assert queue.take_back("d") and not queue.take_back("d")
    assert queue.take_back("b") and queue.waiting() == ["a", "c"]  # taken out of its batch
    queue.put_batch("b2", [("e", {"unit": "e"}), ("f", {"unit": "f"})])
    queue.join("w")
    assert queue.claim("w") == ("b1", [("a", {"unit": "a"}), ("c", {"unit": "c"})])  # in the order queued
    assert queue.claims() == {"a": "w", "c": "w"}
    assert queue.take_back_many(["a", "e"]) == {"e"}  # a is claimed: no longer taken back
    queue.cancel("c")  # claimed: the worker is told
    assert queue.is_cancelled("c")
    assert not queue.has_news()
    queue.started("w", "a", 1.0)
    assert queue.has_news()  # the worker's log grew: a waiting steering process polls now
    assert not queue.has_news()  # once: a line not read yet makes no busy wait
    assert queue.held("w") == {"a": True, "c": False}
    queue.finish("w", "a", {"exit_code": 0})
    queue.skip("w", "c")
    assert not queue.is_cancelled("c") and queue.held("w") == {}
    queue.finish_batch("w", "b1")
    assert queue.claims() == {}
    assert queue.claim("w") == ("b2", [("f", {"unit": "f"})])
    queue.started("w", "f", 2.0)
    queue.release("w", "b2", [("f", {"unit": "f"})], started="f")  # back in the queue, under the same name
    assert queue.waiting() == ["f"] and queue.claims() == {} and queue.held("w") == {}
    assert [(line["name"], line["worker"]) for line in queue.take_log()] == [
        ("a", "w"), ("a", "w"), ("c", "w"), ("f", "w"), ("f", "w")]
    assert queue.take_log() == [] and not queue.has_news()
    other = WorkQueue(queue.root)  # (a worker with a listing of its own; see the next test for this one's)
    other.join("w2")
    assert other.claim("w2")[0] == "b2"
    assert other.claim("w2") is None
    queue.drop_claims("w2")
    assert queue.claims() == {} and queue.waiting() == []
    queue.beat("w", {"beat": 1})
    assert queue.heartbeats() == {"w": ('{"beat": 1}', {"beat": 1})}
    assert not queue.is_revoked("w")
    queue.revoke("w")
    assert queue.is_revoked("w")
    assert not queue.stopping()
    queue.finish_all()
    assert queue.stopping()
    queue.forget_worker("w")
    assert queue.heartbeats() == {} and not queue.is_revoked("w") and not (queue.claimed / "w").exists()


def test_a_gone_workers_claim_goes_back_but_for_the_unit_it_started(tmp_path: Path) -> None:
    """The steering side's view of a worker that is gone: what it finished stays finished, the unit whose
    run started is the run's to judge, the units it had not started wait again in their batch (in one rename,
    so that a steering process killed meanwhile leaves each unit in one place)."""
    queue = WorkQueue(tmp_path / "q")
    queue.create()
    queue.put_batch("b1", [(name, {"unit": name}) for name in ("a", "b", "c", "d")])
    worker = WorkQueue(queue.root)
    worker.join("w")
    assert worker.claim("w")[0] == "b1"
    worker.started("w", "a", 1.0)
    worker.finish("w", "a", {"exit_code": 0})
    worker.started("w", "b", 2.0)
    worker.close_log()  # SIGKILLed while b ran
    held = queue.held("w")
    assert held == {"b": True, "c": False, "d": False}
    assert queue.requeue_claims("w", {n for n, started in held.items() if not started}) == ["c", "d"]
    assert queue.claims() == {} and queue.waiting() == ["c", "d"] and queue.waiting_batches() == ["b1"]
    assert queue.take_back("d") and queue.waiting() == ["c"]


def test_a_unit_in_two_claims_of_a_gone_worker_goes_back_once(tmp_path: Path) -> None:
    """A worker killed in the middle of give_back (the part it hands back written as a claim, the batch's claim
    not yet rewritten) holds those units in two claims: the steering process puts them back once."""
    queue = WorkQueue(tmp_path / "q")
    queue.create()
    queue.put_batch("b1", [(name, {"unit": name}) for name in ("a", "b", "c")])
    worker = WorkQueue(queue.root)
    worker.join("w")
    assert worker.claim("w")[0] == "b1"
    write_batch(os.fspath(queue.claimed / "w"), "b1~b", [("b", {"unit": "b"}), ("c", {"unit": "c"})])
    assert queue.claimed_batches() == {"w": ["b1", "b1~b"]} and queue.held("w") == {"a": False, "b": False,
                                                                                    "c": False}
    assert queue.requeue_claims("w", {"a", "b", "c"}) == ["a", "b", "c"]
    assert queue.waiting() == ["a", "b", "c"] and queue.claims() == {}


def test_units_a_worker_handed_back_can_be_taken_back_by_the_steering_process(tmp_path: Path) -> None:
    """The steering process knows the batch it queued a unit in; a worker may have handed the unit back in a part
    of that batch of its own name (b2batch cancel, a pool given up): the unit is found there and taken back."""
    queue = WorkQueue(tmp_path / "q")
    queue.create()
    queue.put_batch("b1", [(name, {"unit": name}) for name in "abcd"])
    worker = WorkQueue(queue.root)
    worker.join("w")
    assert worker.claim("w")[0] == "b1"
    worker.give_back("w", "b1", [("a", {"unit": "a"}), ("b", {"unit": "b"})], [("c", {"unit": "c"}),
                                                                             ("d", {"unit": "d"})])
    assert queue.waiting_batches() == ["b1~c"] and queue.claims() == {"a": "w", "b": "w"}
    assert queue.take_back_many(["b", "c"]) == {"c"}  # b is claimed: its worker is told by a cancel file
    assert queue.waiting() == ["d"] and queue.take_back("d") and queue.waiting_batches() == []


def test_units_whose_times_nobody_knows_share_batches_and_every_worker_gets_one(tmp_path: Path) -> None:
    """The steering side's batch size: full batches while no unit of the queue has ended (a worker hands back
    what it has not started after the hold, so they do not wait for each other), as many units as fit in
    BATCH_SECONDS once times are known, and never so few batches that a worker gets none."""
    pool = UnitPool(WorkQueue(tmp_path / "q"), template=None)  # type: ignore[arg-type]
    assert pool.batch_size(1000, 2) == MAX_BATCH
    assert pool.batch_size(30, 4) == 8 and pool.batch_size(1, 2) == 1
    for _ in range(5):
        pool.ran_for(0.1)
    assert pool.batch_size(1000, 2) == int(BATCH_SECONDS / 0.1)
    pool.ran_for(30.0)
    assert pool.batch_size(1000, 2) == 1


def test_claim_sees_units_queued_after_its_listing(tmp_path: Path) -> None:
    one, two = WorkQueue(tmp_path / "q"), WorkQueue(tmp_path / "q")
    one.create()
    one.put("a", {})
    one.put("b", {})
    one.join("one")
    two.join("two")
    assert one.claim("one")[0] == "a"  # "one" listed a and b
    assert two.claim("two")[0] == "b"
    one.put("c", {})
    assert one.claim("one") == ("c", [("c", {})])


# --- the worker -------------------------------------------------------------------------------------------


class Workers:
    """A queue in a test folder, its units' files, and worker processes serving it."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.queue = WorkQueue(folder / "queue")
        self.queue.create()
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.seen: list[psutil.Process] = []

    def files(self, name: str) -> dict[str, str]:
        folder = self.folder / "units" / name
        folder.mkdir(parents=True, exist_ok=True)  # the steering side makes the job folder; the logs the unit
        logs = self.folder / "logs" / name
        return {"exit_code": str(folder / "exit_code"), "stdout": str(logs / "stdout"),
                "stderr": str(logs / "stderr")}

    def put(self, name: str, unit: dict[str, Any]) -> None:
        self.queue.put(name, {"key": name, "name": f"unit {name}", "unit": unit, "files": self.files(name)})

    def exit_code(self, name: str) -> int | None:
        try:
            return int(Path(self.files(name)["exit_code"]).read_text())
        except FileNotFoundError:
            return None

    def stdout(self, name: str) -> str:
        return Path(self.files(name)["stdout"]).read_text()

    def stderr(self, name: str) -> str:
        return Path(self.files(name)["stderr"]).read_text()

    def environment(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if k not in JOB_ID_VARIABLES and not k.startswith(("SLURM_", "SGE_", "LSB_"))}
        env["PYTHONPATH"] = os.pathsep.join([str(UNITS), str(REPO), *filter(None, [env.get("PYTHONPATH")])])
        env["PYTHONUNBUFFERED"] = "1"
        env.update(extra)
        return env

    def start(self, worker: str = "w1", env: dict[str, str] | None = None, **config: Any) -> subprocess.Popen[bytes]:
        config = {"queue": str(self.queue.root), "idle_timeout": 30.0, "heartbeat_timeout": HEARTBEAT,
                  "worker": worker, **config}
        spec = self.folder / f"{worker}.spec.json"
        spec.write_text(json.dumps({"worker": config}))
        with open(self.folder / f"{worker}.log", "wb") as log:
            process = subprocess.Popen([sys.executable, "-m", "b2batch.engine.pilots.node_worker", str(spec)],
                                       cwd=self.folder, env=env or self.environment(), stdin=subprocess.DEVNULL,
                                       stdout=log, stderr=subprocess.STDOUT)
        self.processes[worker] = process
        return process

    def log(self, worker: str = "w1") -> str:
        return (self.folder / f"{worker}.log").read_text(errors="replace")

    def ended(self, worker: str = "w1", timeout: float = 10.0) -> int:
        """The worker's exit code, once it ended within ``timeout``."""
        try:
            return self.processes[worker].wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"worker {worker} still runs after {timeout:g} s; its log:\n{self.log(worker)}")

    def running(self, worker: str = "w1", program: str = "sleep", count: int = 1) -> list[psutil.Process]:
        """The worker's descendants running ``program``, once there are ``count`` of them."""

        def found() -> list[psutil.Process]:
            try:
                children = psutil.Process(self.processes[worker].pid).children(recursive=True)
            except psutil.NoSuchProcess:
                return []
            matching = []
            for child in children:
                try:
                    if child.name() == program and not gone(child):
                        matching.append(child)
                except psutil.NoSuchProcess:
                    continue
            return matching if len(matching) >= count else []

        processes = wait_for(found, what=f"{count} {program} process(es) of worker {worker}")
        self.seen += processes
        return processes

    def close(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                try:
                    self.seen += psutil.Process(process.pid).children(recursive=True)
                except psutil.NoSuchProcess:
                    pass
                process.kill()
                process.wait()
        for child in self.seen:
            try:
                child.kill()
            except psutil.NoSuchProcess:
                pass


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Workers]:
    pool = Workers(tmp_path)
    yield pool
    pool.close()


def all_gone(processes: list[psutil.Process], timeout: float = 5.0) -> None:
    wait_for(lambda: all(gone(p) for p in processes), timeout,
             what=f"processes {[p.pid for p in processes]} to end")


def sh(script: str) -> dict[str, Any]:
    return {"command": ["sh", "-c", script]}


def test_worker_runs_command_units_and_ends_on_stop(weird_tmp_path: Path) -> None:
    pool = Workers(weird_tmp_path)
    try:
        order = weird_tmp_path / "order.txt"
        for i in range(4):
            pool.put(f"u{i}", {"command": ["sh", "-c", 'echo "$1" >> "$2"; echo "out-$1"; echo "err-$1" >&2; '
                                           'exit "$1"', "sh", str(i), str(order)]})
        pool.queue.finish_all()
        pool.start(idle_timeout=60.0)  # the stop file, not the idle timeout, ends it
        assert pool.ended() == 0
        for i in range(4):
            assert pool.exit_code(f"u{i}") == i
            out = pool.stdout(f"u{i}")
            assert out.startswith(f"b2batch: unit u{i} started in job ")
            assert f"out-{i}\n" in out and "err-" not in out
            assert pool.stderr(f"u{i}") == f"err-{i}\n"
        assert order.read_text().split() == ["0", "1", "2", "3"]  # one after another, in the order queued
        assert sorted(p.name for p in pool.queue.done.iterdir()) == ["w1.jsonl"]  # one log per worker
        assert pool.queue.waiting() == [] and pool.queue.claims() == {}
        # A worker that ended normally leaves nothing behind in the queue but its results.
        assert pool.queue.heartbeats() == {} and not (pool.queue.claimed / "w1").exists()
        done = pool.queue.take_done()
        assert sorted(done) == [f"u{i}" for i in range(4)]
        for i in range(4):  # what the worker says of each run
            ran = done[f"u{i}"]
            assert ran["worker"] == "w1" and ran["exit_code"] == i and ran["job_id"]
            assert ran["started"] <= ran["ended"]
        assert done["u0"]["ended"] <= done["u1"]["started"]
    finally:
        pool.close()


def test_worker_ends_after_idle_timeout_and_runs_what_comes_meanwhile(workers: Workers) -> None:
    begin = time.monotonic()
    worker = workers.start(idle_timeout=1.5)
    time.sleep(0.5)  # the worker waits for work
    workers.put("late", sh("echo came late"))
    wait_for(lambda: workers.exit_code("late") is not None, what="the late unit to run")
    ran = time.monotonic()
    assert worker.poll() is None, "the worker ended before its idle timeout"
    assert workers.ended() == 0
    assert time.monotonic() - ran >= 1.5 - 0.2  # the idle time counts from the last unit
    assert time.monotonic() - begin < 10
    assert workers.exit_code("late") == 0 and "came late" in workers.stdout("late")
    assert workers.queue.heartbeats() == {}


def test_worker_with_no_idle_timeout_ends_when_the_queue_is_empty(workers: Workers) -> None:
    """A bundle: its units queued before it starts, no stop file."""
    for name in ("a", "b"):
        workers.put(name, {"call": "workqueue_units:returns", "args": [0, name]})
    workers.start(idle_timeout=0)
    assert workers.ended() == 0
    assert [workers.exit_code(name) for name in ("a", "b")] == [0, 0]
    assert "out:b" in workers.stdout("b") and workers.stderr("b") == "err:b\n"


def test_two_workers_run_each_unit_once(workers: Workers) -> None:
    ran = workers.folder / "ran.txt"
    names = [f"u{i:03d}" for i in range(30)]
    for name in names:
        workers.put(name, {"command": ["sh", "-c", 'echo "$1" >> "$2"', "sh", name, str(ran)]})
    workers.queue.finish_all()
    workers.start("w1")
    workers.start("w2")
    assert workers.ended("w1", timeout=30) == 0 and workers.ended("w2", timeout=30) == 0
    assert sorted(ran.read_text().split()) == names
    assert all(workers.exit_code(name) == 0 for name in names)
    assert sorted(workers.queue.take_done()) == names


def test_the_units_after_a_long_one_go_back_for_any_worker(workers: Workers) -> None:
    """A batch whose first unit runs long: the units after it go back into the queue after the hold, as a batch
    of their own, and another worker runs them meanwhile; the claim holds the long one alone."""
    entry = {name: {"key": name, "name": f"unit {name}", "unit": unit, "files": workers.files(name)}
             for name, unit in (("a", sh("sleep 30")), ("b", sh("echo b")), ("c", sh("echo c")))}
    workers.queue.put_batch("one", [(name, entry[name]) for name in "abc"])
    workers.start("w1")
    workers.running("w1")
    workers.start("w2")
    wait_for(lambda: workers.exit_code("b") == 0 and workers.exit_code("c") == 0, timeout=10,
             what="units b and c to run while a still runs")
    assert workers.exit_code("a") is None and workers.queue.claims() == {"a": "w1"}
    assert workers.queue.claimed_batches()["w1"] == ["one"] and workers.queue.claimed_batches()["w2"] == []
    done = workers.queue.take_log()
    assert {line["name"]: line["worker"] for line in done if not "start" in line} == {"b": "w2", "c": "w2"}
    workers.queue.cancel("a")
    wait_for(lambda: workers.exit_code("a") == 128 + signal.SIGTERM, what="unit a to be stopped")
    wait_for(lambda: workers.queue.claimed_batches().get("w1") == [], what="w1 to drop its claim")


def test_a_worker_holds_the_units_of_its_batch_for_a_moment_only(workers: Workers) -> None:
    """A batch of many short units: the worker that claimed it hands half of the units it has not started
    back at each hold, so a worker that comes later shares them."""
    names = [f"u{i:02d}" for i in range(60)]
    workers.queue.put_batch("many", [(name, {"key": name, "name": f"unit {name}", "files": workers.files(name),
                                             "unit": sh("sleep 0.05")}) for name in names])
    workers.start("w1", idle_timeout=1.0)
    wait_for(lambda: workers.exit_code("u00") == 0, what="the first unit to run")
    workers.start("w2", idle_timeout=1.0)
    assert workers.ended("w1", timeout=30) == 0 and workers.ended("w2", timeout=30) == 0
    ran = Counter(line["worker"] for line in workers.queue.take_log() if "start" in line)
    assert sum(ran.values()) == len(names) and ran["w2"] >= 10, ran
    assert all(workers.exit_code(name) == 0 for name in names)


def test_crashing_units_get_their_exit_codes_and_the_worker_goes_on(workers: Workers) -> None:
    units = {
        "a-segfault": ({"call": "workqueue_units:segfault"}, 139),
        "b-after-segfault": (sh("echo still here"), 0),
        "c-segfault-command": ({"command": [sys.executable, "-c",
                                            "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"]}, 139),
        "d-os-exit": ({"call": "workqueue_units:exit_hard", "args": [7]}, 7),
        "e-returns": ({"call": "workqueue_units:returns", "args": [5, "five"]}, 5),
        "f-raises": ({"call": "workqueue_units:raises", "args": ["boom"]}, 1),
        "g-sys-exit": ({"call": "workqueue_units:exits", "args": [3]}, 3),
        "h-sys-exit-none": ({"call": "workqueue_units:exits", "args": [None]}, 0),
        "i-killed": (sh("kill -9 $$"), 137),
        "j-no-such-program": ({"command": ["/no/such/program"]}, 1),
        "k-no-such-function": ({"call": "workqueue_units:nothing"}, 1),
        "l-last": ({"call": "workqueue_units:returns", "args": [0, "last"]}, 0),
    }
    for name, (unit, _) in units.items():
        workers.put(name, unit)
    workers.start(idle_timeout=0)
    assert workers.ended(timeout=30) == 0, workers.log()
    assert {name: workers.exit_code(name) for name in units} == {name: code for name, (_, code) in units.items()}
    assert "about to crash" in workers.stdout("a-segfault")
    assert "still here" in workers.stdout("b-after-segfault")
    assert "leaving at once" in workers.stdout("d-os-exit")
    assert "RuntimeError: boom" in workers.stderr("f-raises")
    assert "AttributeError" in workers.stderr("k-no-such-function")
    assert "out:last" in workers.stdout("l-last")
    assert sorted(workers.queue.take_done()) == sorted(units)


def _stopped_by(workers: Workers, signum: int, **config: Any) -> None:
    """Start a worker on unit a (a shell with children of its own) and b, stop it with ``signum`` while a runs:
    a's processes are gone within seconds."""
    workers.put("a", sh("sleep 30 & sleep 30 & wait"))
    workers.put("b", sh("echo never"))
    worker = workers.start(**config)
    sleeps = workers.running(count=2)
    unit = psutil.Process(worker.pid).children()  # the forked child (the shell)
    begin = time.monotonic()
    worker.send_signal(signum)
    workers.ended(timeout=5)
    assert time.monotonic() - begin < 5
    all_gone(sleeps + unit)
    assert workers.exit_code("a") is None and workers.exit_code("b") is None
    assert workers.queue.heartbeats() == {}, "a later run would take it for a live worker"


AT_THE_END = [pytest.param(signal.SIGUSR1, {}, id="SIGUSR1"), pytest.param(signal.SIGUSR2, {}, id="SIGUSR2"),
              *[pytest.param(s, {"walltime": 60.0, "unit_seconds": 1.0}, id=f"{signal.Signals(s).name}-near-walltime")
                for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)]]


@pytest.mark.parametrize(("signum", "config"), AT_THE_END)
def test_the_allocations_end_puts_the_running_unit_back(workers: Workers, signum: int, config: dict) -> None:
    """The batch system's warning, or any stop signal within END_MARGIN of the walltime: the unit goes back under
    its own name, not counted as failed (its start and its release are in the log, no end)."""
    _stopped_by(workers, signum, **config)
    assert workers.queue.waiting() == ["a", "b"]
    assert workers.queue.claims() == {}
    assert workers.queue.take_done() == {}
    assert json.loads((workers.queue.todo / "a.json").read_text())["units"][0][1]["key"] == "a"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP],
                         ids=lambda s: signal.Signals(s).name)
def test_a_stop_signal_before_the_allocations_end_leaves_the_unit_to_the_steering_process(
        workers: Workers, signum: int) -> None:
    """scancel, condor_rm or qdel from outside: the running unit ends with the worker, as in a job of its own
    (held by the worker, started, no end: the steering process counts it lost, within max_resubmissions); the
    units it had not started go back."""
    _stopped_by(workers, signum)
    assert workers.queue.waiting() == ["b"]
    assert workers.queue.claims() == {"a": "w1"} and workers.queue.held("w1") == {"a": True}
    assert workers.queue.requeue_claims("w1", set()) == [] and workers.queue.claims() == {}


def test_stop_signal_while_idle_ends_the_worker(workers: Workers) -> None:
    worker = workers.start()
    wait_for(lambda: workers.queue.heartbeats(), what="the first heartbeat")
    worker.send_signal(signal.SIGTERM)
    workers.ended(timeout=5)


def test_cancel_stops_the_unit_and_the_worker_goes_on(workers: Workers) -> None:
    workers.put("a", sh("sleep 30 & sleep 30 & wait"))
    workers.put("b", sh("echo waited"))
    workers.put("c", sh("echo never"))
    workers.start(idle_timeout=0)
    sleeps = workers.running(count=2)
    workers.queue.cancel("c")  # still waiting: never runs
    workers.queue.cancel("a")  # running: stopped
    assert workers.ended(timeout=5) == 0
    all_gone(sleeps)
    assert workers.exit_code("a") == 128 + signal.SIGTERM
    assert workers.exit_code("b") == 0 and "waited" in workers.stdout("b")
    assert workers.exit_code("c") is None
    assert sorted(workers.queue.take_done()) == ["a", "b"]
    assert list(workers.queue.cancelled.iterdir()) == []  # the cancellation was cleared with the unit


def test_worker_runs_a_batch_in_order_skips_what_was_cancelled_and_puts_the_rest_back_on_a_signal(
        workers: Workers) -> None:
    """A batch of units: run one after another, a unit cancelled while its batch was claimed is skipped, and a
    stop signal puts the rest of the batch back into the queue as one batch."""
    entry = {name: {"key": name, "name": f"unit {name}", "unit": unit, "files": workers.files(name)}
             for name, unit in (("a", sh("sleep 30")), ("b", sh("echo b")), ("c", sh("echo c")),
                                ("d", sh("sleep 30")), ("e", sh("echo e")))}
    workers.queue.put_batch("one", [(name, entry[name]) for name in "abc"])
    worker = workers.start()
    workers.running()
    workers.queue.cancel("b")  # claimed: the worker skips it
    workers.queue.cancel("a")  # running: stopped
    wait_for(lambda: workers.exit_code("c") == 0, what="unit c to run")
    assert workers.exit_code("a") == 128 + signal.SIGTERM and workers.exit_code("b") is None
    assert workers.queue.claims() == {} and list(workers.queue.cancelled.iterdir()) == []
    workers.queue.put_batch("two", [(name, entry[name]) for name in "de"])
    sleeps = workers.running()
    worker.send_signal(signal.SIGTERM)
    workers.ended(timeout=5)
    all_gone(sleeps)
    # SIGTERM before the allocation's end: d, stopped, ends with the worker (held, for the steering process to
    # count lost); e, not started, goes back with its batch
    assert workers.queue.waiting_batches() == ["two"] and workers.queue.waiting() == ["e"]
    assert workers.queue.claims() == {"d": "w1"}
    assert sorted(workers.queue.take_done()) == ["a", "c"] and workers.exit_code("d") is None


def test_cancelled_call_unit_unwinds(workers: Workers) -> None:
    marker = workers.folder / "unwound"
    workers.put("a", {"call": "workqueue_units:sleeps", "args": [30, str(marker)]})
    workers.put("b", {"call": "workqueue_units:returns", "args": [0, "b"]})
    workers.start(idle_timeout=0)
    wait_for(lambda: workers.queue.heartbeats().get("w1", ("", {}))[1].get("unit") == "a", what="unit a to run")
    time.sleep(0.3)  # let the child get into its sleep
    workers.queue.cancel("a")
    assert workers.ended(timeout=5) == 0
    assert workers.exit_code("a") == 128 + signal.SIGTERM
    assert marker.read_text() == "unwound\n"  # its finally ran
    assert workers.exit_code("b") == 0


def test_revoked_worker_stops_without_finishing_its_unit(workers: Workers) -> None:
    workers.put("a", sh("sleep 30"))
    workers.put("b", sh("echo never"))
    worker = workers.start()
    sleeps = workers.running()
    begin = time.monotonic()
    workers.queue.revoke("w1")
    workers.ended(timeout=5)
    assert time.monotonic() - begin < 5
    all_gone(sleeps)
    assert worker.returncode == 0
    assert workers.queue.claims() == {"a": "w1"}  # the steering side decides what becomes of it
    assert workers.queue.waiting() == ["b"]
    assert workers.exit_code("a") is None and workers.queue.take_done() == {}
    assert workers.queue.held("w1") == {"a": True}  # its run started
    assert "w1" in workers.queue.heartbeats()


def test_revoked_idle_worker_ends(workers: Workers) -> None:
    workers.start()
    wait_for(lambda: workers.queue.heartbeats(), what="the first heartbeat")
    workers.queue.revoke("w1")
    workers.ended(timeout=5)


def test_heartbeat_is_kept_while_a_unit_runs(workers: Workers) -> None:
    workers.put("a", sh("sleep 1.5"))
    worker = workers.start(env=workers.environment(B2BATCH_LOCAL_JOB_ID="job-42"))
    wait_for(lambda: workers.exit_code("a") is None and workers.queue.heartbeats().get("w1", ("", {}))[1]
             .get("unit") == "a", what="unit a to run")
    seen = []
    while workers.exit_code("a") is None:
        text, beat = workers.queue.heartbeats()["w1"]
        if not seen or seen[-1][0] != text:
            seen.append((text, beat))
        time.sleep(0.05)
    beats = [beat["beat"] for _, beat in seen]
    assert len(beats) >= 4, seen  # one every 0.2 s for 1.5 s
    assert beats == sorted(set(beats))
    running = [beat for _, beat in seen if beat["unit"] == "a"]
    assert running and all(beat["ran"] == 0 for beat in running)
    first = seen[0][1]
    assert first["worker"] == "w1" and first["pid"] == worker.pid and first["job_id"] == "job-42"
    wait_for(lambda: workers.queue.heartbeats()["w1"][1]["ran"] == 1, what="a heartbeat after the unit")
    assert workers.queue.heartbeats()["w1"][1]["unit"] is None
    workers.queue.finish_all()
    assert workers.ended() == 0


def test_worker_that_cannot_beat_stops_its_unit(workers: Workers) -> None:
    """The shared file system is gone for the worker: it stops its unit and ends within the lease."""
    workers.put("a", sh("sleep 30"))
    workers.start()
    sleeps = workers.running()
    begin = time.monotonic()
    workers.queue.workers.rename(workers.folder / "workers-away")
    workers.queue.workers.write_text("not a folder\n")  # every heartbeat now fails
    workers.ended(timeout=5)
    assert time.monotonic() - begin >= HEARTBEAT / 2 - 0.1  # it kept trying for its lease
    all_gone(sleeps)
    assert "Cannot write the heartbeat" in workers.log()
    assert workers.queue.claims() == {"a": "w1"} and workers.exit_code("a") is None


def test_worker_with_too_little_allocation_left_claims_nothing(workers: Workers) -> None:
    workers.put("a", sh("echo never"))
    workers.start(walltime=3.0, unit_seconds=1.0)  # 1.1 s + 5 s of margin do not fit
    assert workers.ended() == 0
    assert workers.queue.waiting() == ["a"] and workers.exit_code("a") is None


@pytest.mark.slow
def test_stop_signal_during_preload_stops_the_unit(workers: Workers) -> None:
    marker = workers.folder / "preloading"
    workers.put("a", {"command": ["sleep", "3"], "preload": ["workqueue_units"]})
    worker = workers.start(env=workers.environment(WQ_PRELOAD_MARKER=str(marker), WQ_PRELOAD_SECONDS="0.5"))
    wait_for(marker.exists, what="the preload to start")
    begin = time.monotonic()
    worker.send_signal(signal.SIGTERM)
    workers.ended(timeout=10)
    assert workers.queue.waiting() == ["a"]
    assert time.monotonic() - begin < 2.0, "the unit ran on after the worker was told to stop"





def test_unit_dies_with_its_worker(workers: Workers) -> None:
    """A worker killed outright (SIGKILL, the OOM killer) takes its unit with it."""
    workers.put("a", {"command": ["sleep", "30"]})
    worker = workers.start()
    sleeps = workers.running()
    worker.kill()
    workers.ended(timeout=5)
    all_gone(sleeps)
    assert workers.queue.claims() == {"a": "w1"} and workers.exit_code("a") is None


@pytest.mark.xfail(strict=True, reason="limitation: only the unit's own process gets PR_SET_PDEATHSIG; what it "
                                       "started (a shell's commands, a task's subprocesses) runs on when the "
                                       "worker is killed outright")
def test_processes_of_a_unit_die_with_its_worker(workers: Workers) -> None:
    workers.put("a", sh("sleep 30 & sleep 30 & wait"))
    worker = workers.start()
    sleeps = workers.running(count=2)
    worker.kill()
    workers.ended(timeout=5)
    all_gone(sleeps, timeout=2)


def _can_unshare_pids() -> bool:
    try:
        return subprocess.run(["unshare", "--pid", "--fork", "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@pytest.mark.skipif(not _can_unshare_pids(), reason="needs unshare --pid (root or user namespaces)")
def test_worker_as_pid_1_runs_its_units(workers: Workers) -> None:
    workers.put("a", sh("echo hello"))
    spec = workers.folder / "pid1.spec.json"
    spec.write_text(json.dumps({"worker": {"queue": str(workers.queue.root), "idle_timeout": 0,
                                           "heartbeat_timeout": HEARTBEAT, "worker": "pid1"}}))
    done = subprocess.run(["unshare", "--pid", "--fork", sys.executable, "-m", "b2batch.engine.pilots.node_worker", str(spec)],
                          cwd=workers.folder, env=workers.environment(), capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert workers.exit_code("a") == 0


def test_failing_preload_fails_its_unit_not_the_worker(workers: Workers) -> None:
    workers.put("a", {"command": ["true"], "preload": ["no_such_module_for_b2batch_tests"]})
    workers.put("b", sh("echo b"))
    workers.start(idle_timeout=0)
    assert workers.ended() == 0, workers.log()
    assert workers.exit_code("a") == 1 and "no_such_module_for_b2batch_tests" in workers.stderr("a")
    assert workers.exit_code("b") == 0


def test_sys_exit_message_reaches_the_units_stderr(workers: Workers) -> None:
    workers.put("a", {"call": "workqueue_units:exits", "args": ["the reason why"]})
    workers.start(idle_timeout=0)
    assert workers.ended() == 0
    assert workers.exit_code("a") == 1
    assert "the reason why" in workers.stderr("a")
