"""A worker's runner (b2batch.engine.pilots.unit_processes): one long-lived child runs unit after unit; a unit that kills it
takes no other unit down, and what a unit changes of its process does not reach the next unit."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import luigi
import pytest

from conftest import wait_for
from test_work_queue import Workers

from b2batch.engine import JobFiles
from b2batch.engine.shared_logs import SharedLogs
from b2batch.luigi_frontend import task_on_node


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Workers]:
    pool = Workers(tmp_path)
    yield pool
    pool.close()


def reports(path: Path) -> dict[str, dict[str, Any]]:
    return {line["tag"]: line for line in map(json.loads, path.read_text().splitlines())}


def test_a_unit_that_kills_its_runner_takes_no_other_unit_down(workers: Workers) -> None:
    seen = workers.folder / "seen.jsonl"
    units = {
        "a-first": ({"call": "unitrunner_units:report", "args": [str(seen), "a"]}, 0),
        "b-same-runner": ({"call": "unitrunner_units:report", "args": [str(seen), "b"]}, 0),
        "c-segfault": ({"call": "workqueue_units:segfault"}, 139),
        "d-after-segfault": ({"call": "unitrunner_units:report", "args": [str(seen), "d"]}, 0),
        "e-os-exit": ({"call": "workqueue_units:exit_hard", "args": [7]}, 7),
        "f-after-os-exit": ({"call": "unitrunner_units:report", "args": [str(seen), "f"]}, 0),
        "g-raises": ({"call": "workqueue_units:raises", "args": ["boom"]}, 1),
        "h-after-raise": ({"call": "unitrunner_units:report", "args": [str(seen), "h"]}, 0),
        "i-leaves-a-thread": ({"call": "unitrunner_units:leave_thread", "args": [str(seen)]}, 0),
        "j-after-thread": ({"call": "unitrunner_units:report", "args": [str(seen), "j"]}, 0),
        "k-sys-exit-big": ({"call": "workqueue_units:exits", "args": [300]}, 300 & 0xFF),
        "l-closes-stdout": ({"call": "unitrunner_units:close_stdout", "args": [str(seen)]}, 0),
        "m-after-close": ({"call": "unitrunner_units:report", "args": [str(seen), "m"]}, 0),
    }
    for name, (unit, _) in units.items():
        workers.put(name, unit)
    workers.start(idle_timeout=0)
    assert workers.ended(timeout=30) == 0, workers.log()
    # Every unit has its own record: exit code, logs, a line in the worker's log of finished runs with its usage.
    assert {name: workers.exit_code(name) for name in units} == {name: code for name, (_, code) in units.items()}
    done = workers.queue.take_done()
    assert sorted(done) == sorted(units)
    for tag, name in (("a", "a-first"), ("d", "d-after-segfault"), ("f", "f-after-os-exit"), ("j", "j-after-thread")):
        out, err = workers.stdout(name), workers.stderr(name)
        assert out.startswith(f"b2batch: unit {name} started in job ") and out.endswith(f"out:{tag}\n"), out
        assert err == f"err:{tag}\n"
    assert "about to crash" in workers.stdout("c-segfault") and "out:" not in workers.stdout("c-segfault")
    assert "leaving at once" in workers.stdout("e-os-exit")
    assert "RuntimeError: boom" in workers.stderr("g-raises") and "err:" not in workers.stderr("g-raises")
    for name in units:
        usage = done[name]["usage"]
        assert usage["cpu"] >= 0 and usage["max_rss"] > 0 and usage["wall"] >= 0 and usage["source"] == "wrapper"
    assert not list(workers.folder.rglob("usage.json"))  # the figures are in the log: no file of its own
    # One runner ran units in turn; it was replaced after each unit that ended it, after the stray thread and
    # the closed stdout, and not after a unit that merely raised.
    pid = {tag: line["pid"] for tag, line in reports(seen).items()}
    assert pid["a"] == pid["b"]
    assert len({pid["b"], pid["d"], pid["f"]}) == 3
    assert pid["f"] == pid["h"] == pid["threads"]
    assert pid["j"] != pid["threads"]
    assert pid["m"] != pid["closer"] and workers.stdout("m-after-close").endswith("out:m\n")


def test_what_a_unit_changes_of_its_process_does_not_reach_the_next_unit(workers: Workers) -> None:
    seen = workers.folder / "seen.jsonl"
    elsewhere = workers.folder / "elsewhere"
    elsewhere.mkdir()
    workers.put("a", {"call": "unitrunner_units:report", "args": [str(seen), "before"]})
    workers.put("b", {"call": "unitrunner_units:change_process", "args": [str(seen), str(elsewhere)]})
    workers.put("c", {"call": "unitrunner_units:report", "args": [str(seen), "after"]})
    workers.start(idle_timeout=0)
    assert workers.ended(timeout=30) == 0, workers.log()
    assert [workers.exit_code(name) for name in "abc"] == [0, 0, 0]
    found = reports(seen)
    before, after = found["before"], found["after"]
    assert before["pid"] == found["changer"]["pid"] == after["pid"], "the units did not share a runner"
    assert after["variable"] is None and after["cwd"] == before["cwd"] == str(workers.folder)
    assert after["argv"] == before["argv"] and not after["leaked_path"] and after["umask"] == before["umask"]
    assert "out:after" in workers.stdout("c")  # sys.stdout was put back too


def test_a_unit_that_asks_for_a_fresh_process_gets_one(workers: Workers) -> None:
    seen = workers.folder / "seen.jsonl"
    workers.put("a", {"call": "unitrunner_units:report", "args": [str(seen), "a"]})
    workers.put("b", {"call": "unitrunner_units:report", "args": [str(seen), "b"], "fresh_process": True})
    workers.put("c", {"call": "unitrunner_units:report", "args": [str(seen), "c"]})
    workers.start(idle_timeout=0)
    assert workers.ended(timeout=30) == 0, workers.log()
    assert [workers.exit_code(name) for name in "abc"] == [0, 0, 0]
    pid = {tag: line["pid"] for tag, line in reports(seen).items()}
    assert pid["a"] == pid["c"] != pid["b"]
    assert workers.stdout("b").endswith("out:b\n") and workers.stderr("b") == "err:b\n"


def test_a_result_a_unit_hands_over_comes_back_in_its_line_of_the_log(workers: Workers) -> None:
    """A unit in a runner hands its result to the worker, whose log line carries it (no file of its own); the
    next unit's line has none of it; a unit in a process of its own cannot hand one over (it writes its file)."""
    seen = workers.folder / "seen.jsonl"
    workers.put("a", {"call": "unitrunner_units:hands", "args": [str(seen), "a"]})
    workers.put("b", {"call": "unitrunner_units:report", "args": [str(seen), "b"]})
    workers.put("c", {"call": "unitrunner_units:hands", "args": [str(seen), "c"], "fresh_process": True})
    workers.put("d", {"call": "unitrunner_units:hands", "args": [str(seen), "d"]})
    workers.start(idle_timeout=0)
    assert workers.ended(timeout=30) == 0, workers.log()
    done = workers.queue.take_done()
    assert done["a"]["result"] == {"tag": "a"} and done["d"]["result"] == {"tag": "d"}
    assert "result" not in done["b"] and "result" not in done["c"]
    assert {tag: line["handed"] for tag, line in reports(seen).items() if "handed" in line} == {
        "a": True, "c": False, "d": True}


def test_a_unit_without_log_files_writes_its_part_of_its_workers_logs_which_its_line_names(workers: Workers) -> None:
    """unit_logs "pilot": an entry that names no stdout and stderr. The unit (in the runner, in a fresh process,
    or failing) writes into its worker's logs, starting with the line that names it; the worker's line of the
    queue's log gives the bytes of its part, which JobFiles reads and quotes; no log folder is made."""
    from b2batch.engine import JobFiles

    seen = workers.folder / "seen.jsonl"
    units = {"a": {"call": "unitrunner_units:report", "args": [str(seen), "a"]},
             "b": {"call": "workqueue_units:raises", "args": ["boom-b"]},
             "c": {"call": "unitrunner_units:report", "args": [str(seen), "c"], "fresh_process": True},
             "d": {"call": "unitrunner_units:report", "args": [str(seen), "d"]}}
    for name, unit in units.items():
        workers.queue.put(name, {"key": name, "name": f"unit {name}", "unit": unit,
                                 "files": {"exit_code": workers.files(name)["exit_code"]}})
    workers.start(idle_timeout=0)
    assert workers.ended(timeout=30) == 0, workers.log()
    done = workers.queue.take_done()
    assert {name: workers.exit_code(name) for name in units} == {"a": 0, "b": 1, "c": 0, "d": 0}
    log = (workers.folder / "w1.log").read_bytes()  # the worker's stdout and stderr (one file here)
    for name in units:
        files = JobFiles(folder=workers.folder / "units" / name, log_folder=workers.folder / "logs" / name)
        files.known_log_parts(done[name]["logs"])
        path, first, end = files.log_part("stdout")
        assert path == str(workers.folder / "w1.log") and files.stderr == workers.folder / "w1.log"
        part = log[first:end].decode()
        assert part.startswith(f"b2batch: unit {name} started in job "), part
        others = [other for other in units if other != name]
        assert not any(f"out:{other}" in part or f"boom-{other}" in part for other in others), part
        tail = files.stderr_tail()
        assert (f"err:{name}" in tail) if name != "b" else ("RuntimeError: boom-b" in tail), tail
    assert not (workers.folder / "logs").exists()  # no unit made a log folder
    # a JobFiles whose unit said nothing about its logs reads its own files, as before
    assert JobFiles(folder=workers.folder / "x", log_folder=workers.folder / "nowhere").read_log("stderr", 10) == (
        b"", 0)


def test_units_parts_of_shared_logs_are_read_through_files_kept_open(tmp_path: Path) -> None:
    """A steering process that reads many units' parts of a few pilots' logs opens each log once (SharedLogs); a
    log that reads short (replaced meanwhile) is opened again; at most SharedLogs.OPEN stay open."""
    logs = [tmp_path / f"pilot{i}.log" for i in range(3)]
    for i, log in enumerate(logs):
        log.write_bytes(b"".join(f"p{i}u{k}\n".encode() for k in range(4)))
    shared = SharedLogs()
    shared.OPEN = 2

    def part(log: Path, unit: int, limit: int = 100) -> bytes:
        files = JobFiles(folder=tmp_path / "units" / "x", log_folder=tmp_path / "logs" / "x")
        first = 5 * unit  # each line is 5 bytes
        files.known_log_parts({"stdout": [str(log), first, first + 5], "stderr": [str(log), first, first]})
        assert files.read_log("stderr", limit, shared) == (b"", 0) and not files.had_own_logs()
        data, size = files.read_log("stdout", limit, shared)
        assert size == 5 and (data, size) == files.read_log("stdout", limit)  # the same as read by open()
        return data

    assert [part(log, k) for k in (3, 0) for log in logs] == [b"p0u3\n", b"p1u3\n", b"p2u3\n", b"p0u0\n",
                                                                   b"p1u0\n", b"p2u0\n"]
    assert len(shared._fds) == 2
    logs[2].unlink()  # replaced by a longer log: its cached descriptor reads short, the new file is opened
    logs[2].write_bytes(b"".join(f"q2u{k}\n".encode() for k in range(6)))
    assert part(logs[2], 5) == b"q2u5\n" and part(logs[2], 1, limit=2) == b"1\n"
    shared.close()
    assert shared._fds == {}


def test_the_parts_of_a_pilots_units_that_follow_one_another_take_one_read(tmp_path: Path, monkeypatch) -> None:
    """The units of a poll are read in about the order their pilot wrote them: one read takes the bytes ahead
    too, and the next parts come from them; a part beyond what was read (written since) is read again."""
    log = tmp_path / "pilot.log"
    log.write_bytes(b"".join(f"u{k:03d}\n".encode() for k in range(100)))
    reads: list[tuple[int, int]] = []
    real = os.pread
    monkeypatch.setattr(os, "pread", lambda fd, size, offset: reads.append((offset, size)) or real(fd, size, offset))
    shared = SharedLogs()
    per_read = shared.AHEAD_PARTS  # parts (of 5 bytes) one read takes
    assert [shared.read(str(log), 5 * k, 5) for k in range(100)] == [f"u{k:03d}\n".encode() for k in range(100)]
    assert len(reads) == -(-100 // per_read) < 100
    with log.open("ab") as f:
        f.write(b"u100\n")
    count = len(reads)
    assert shared.read(str(log), 500, 5) == b"u100\n" and len(reads) == count + 1
    assert shared.read(str(log), 0, 10) == b"u000\nu001\n" and len(reads) == count + 2  # before the last read
    shared.close()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGUSR1], ids=["SIGTERM", "SIGUSR1"])
def test_a_stop_signal_stops_a_call_unit_which_unwinds(workers: Workers, signum: int) -> None:
    """SIGUSR1 (the batch system's warning) puts the call back; SIGTERM before the allocation's end (scancel from
    outside) leaves it to the steering process, which counts it lost (test_work_queue.py says more). Either way
    the unit's call unwinds (its finally runs) and the units not started go back."""
    marker = workers.folder / "unwound"
    workers.put("a", {"call": "workqueue_units:returns", "args": [0, "a"]})
    workers.put("b", {"call": "workqueue_units:sleeps", "args": [30, str(marker)]})
    workers.put("c", {"call": "workqueue_units:returns", "args": [0, "never"]})
    worker = workers.start()
    wait_for(lambda: workers.queue.heartbeats().get("w1", ("", {}))[1].get("unit") == "b", what="unit b to run")
    worker.send_signal(signum)
    workers.ended(timeout=5)
    assert workers.exit_code("a") == 0
    if signum == signal.SIGUSR1:
        assert workers.queue.waiting() == ["b", "c"] and workers.queue.claims() == {}
    else:
        assert workers.queue.waiting() == ["c"] and workers.queue.claims() == {"b": "w1"}
    assert workers.exit_code("b") is None and sorted(workers.queue.take_done()) == ["a"]
    if signum == signal.SIGTERM:
        assert marker.read_text() == "unwound\n"


class Counted(luigi.Task):
    """A task that changes its class: the next task must not see it."""

    i = luigi.IntParameter()
    seen: list[Any] = []  # noqa: RUF012 - the test reads it
    total = 0

    def run(self) -> None:
        Counted.seen.append((self.i, Counted.total, getattr(Counted, "added", None)))
        Counted.total += 10
        Counted.added = "by a task"


def test_a_luigi_task_changes_to_its_class_do_not_reach_the_next_task(tmp_path: Path) -> None:
    """In a runner, the luigi front-end's unit puts task classes back as they were loaded."""
    seen = Counted.seen  # the list object itself is the class's: its content survives, as documented
    earlier = Counted(i=0)
    for i in range(2):
        spec = tmp_path / f"{i}.json"
        spec.write_text(json.dumps({"task_module": __name__, "task_family": "Counted",
                                    "task_params": {"i": str(i)}, "result_file": str(tmp_path / f"{i}.result")}))
        assert task_on_node.run_unit(str(spec)) == 0, (tmp_path / f"{i}.result").read_text()
    assert seen == [(0, 0, None), (1, 0, None)]
    assert Counted.total == 0 and not hasattr(Counted, "added")
    assert Counted(i=0) is not earlier  # luigi's cache of task instances was emptied
    del seen[:]


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))


def test_a_result_is_handed_over_only_in_a_runner_and_only_when_it_is_json(monkeypatch: pytest.MonkeyPatch) -> None:
    """Outside a runner (a unit in a process of its own, a job of its own) nothing is handed over: the unit writes
    its file; in a runner, a result that cannot go into a JSON line is refused (the unit writes its file then)."""
    from b2batch.engine.pilots import unit_processes

    assert unit_processes.hand_result({"status": "DONE"}) is False  # this test process is no runner
    handed: dict[str, Any] = {}
    monkeypatch.setattr(unit_processes, "_hand_over", handed)
    assert unit_processes.hand_result({"values": {1, 2}}) is False and handed == {}
    assert unit_processes.hand_result({"status": "DONE"}) is True and handed == {"result": {"status": "DONE"}}
    assert unit_processes.hand_result(None) is True and handed == {"result": None}


def test_sigcont_ends_a_workers_idle_pause_at_once() -> None:
    """The steering process of local pilots wakes them (BatchSystem.wake: SIGCONT) when units come or the run
    closes: the pause ends then, not when its time is up."""
    import os
    import signal
    import threading
    import time

    from b2batch.engine.pilots.idle_wait import IdleWait

    wake = IdleWait()
    try:
        timer = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGCONT))
        timer.start()
        began = time.monotonic()
        wake.wait(30.0)
        waited = time.monotonic() - began
        timer.join()
        assert 0.15 < waited < 10.0, waited
    finally:
        wake.close()
    assert signal.getsignal(signal.SIGCONT) is signal.SIG_DFL
