"""The joblib backend (b2batch.joblib) on local jobs: values and order as loky's, exceptions, the throttle,
delete_task_file_on_load, nested Parallel, large arguments, a killed job, the parameters' mapping, the report.

The same scenarios on the real Slurm and the HTCondor emulator are in test_joblib_clusters.py; joblib's own
backend-parametrized tests in test_joblib_conformance.py."""

from __future__ import annotations

import json
import logging
import re
import os
import signal
import time
from pathlib import Path

import pytest

pytest.importorskip("joblib")

from joblib import Parallel, delayed, parallel_config  # noqa: E402

import b2batch.joblib  # noqa: E402
from b2batch.calls import CallJobError, RemoteTraceback  # noqa: E402
from b2batch.errors import SettingError  # noqa: E402
from b2batch.joblib import NestingError, options  # noqa: E402

from conftest import wait_for  # noqa: E402


def square(x: int) -> int:
    if x < 0:
        raise ValueError(f"negative: {x}")
    return x * x


def interval(folder: str, i: int, seconds: float) -> int:
    """Note when this call ran (start and end) and how many task files its batch folder held meanwhile."""
    start = time.time()
    time.sleep(seconds)
    files = len(list(Path(folder).glob("*/jobs/*/call.pkl")))
    Path(folder, f"{i}.json").write_text(json.dumps([start, time.time(), files]))
    return i


def most_overlapping(intervals: list[list[float]]) -> int:
    events = sorted([(s, 1) for s, _e, *_ in intervals] + [(e, -1) for _s, e, *_ in intervals])
    most = now = 0
    for _t, step in events:
        now += step
        most = max(most, now)
    return most


def inner_level(j: int) -> tuple[int, str | None]:
    return os.getpid(), os.environ.get("B2BATCH_JOBLIB_LEVEL")


def outer(i: int) -> dict:
    return {"pid": os.getpid(), "inner": Parallel()(delayed(inner_level)(j) for j in range(3))}


def explicit_nested(i: int) -> int:
    with parallel_config(backend="b2batch", batch_system="local"):
        return sum(Parallel()(delayed(square)(j) for j in range(2)))


def big(data: bytes) -> bytes:
    return data[::-1] + b"!"


def write_pid_and_sleep(folder: str, seconds: float) -> int:
    Path(folder, f"{os.getpid()}.pid").write_text("")
    time.sleep(seconds)
    return os.getpid()


# --- results -------------------------------------------------------------------------------------------------

def test_values_in_order_as_loky_as_list_and_generators(tmp_path: Path) -> None:
    expected = Parallel(n_jobs=2, backend="loky")(delayed(square)(i) for i in range(30))
    shared = tmp_path / "shared"
    with parallel_config(backend="b2batch", n_jobs=-1, batch_system="local", shared_data_dir=str(shared)):
        assert Parallel()(delayed(square)(i) for i in range(30)) == expected
        stream = Parallel(return_as="generator")(delayed(square)(i) for i in range(30))
        assert next(stream) == 0
        assert list(stream) == expected[1:]
        assert sorted(Parallel(return_as="generator_unordered")(delayed(square)(i) for i in range(30))) \
            == sorted(expected)
    assert shared.is_dir() and not list(shared.iterdir()), "each call's folder shared_data_dir/<batch> is removed"


def test_an_exception_reaches_the_caller_with_its_type_message_and_remote_traceback() -> None:
    with parallel_config(backend="b2batch", batch_system="local"), pytest.raises(ValueError) as caught:
        Parallel()(delayed(square)(i) for i in (1, -2, 3))
    error = caught.value
    assert str(error) == "negative: -2"
    assert isinstance(error.__cause__, RemoteTraceback) and "in square" in error.__cause__.text
    assert any("local" in note and "stderr" in note for note in error.__notes__)


def test_a_main_function_runs_in_jobs(workflow) -> None:
    wf = workflow("joblib_calls.py")
    done = wf.run("values", "--system", "local", timeout=120)
    result = json.loads(done.stdout.split("RESULT ", 1)[1])
    assert result["list"] == result["generator"] == result["loky"] == [i * i for i in range(12)], done.stderr[-3000:]
    assert result["unordered"] == result["loky"]


def test_a_50_mb_argument_and_result(tmp_path: Path) -> None:
    data = os.urandom(50 * 1024 * 1024)
    with parallel_config(backend="b2batch", batch_system="local"):
        [result] = Parallel()(delayed(big)(data) for _ in range(1))
    assert len(result) == len(data) + 1 and result[:-1] == data[::-1]


# --- throttle and task files ---------------------------------------------------------------------------------

def test_the_throttle_bounds_the_calls_running_at_once(tmp_path: Path) -> None:
    folder = tmp_path / "times"
    folder.mkdir()
    shared = tmp_path / "shared"
    # Own jobs (no pilots), six local slots: without the throttle all six calls would overlap.
    with parallel_config(backend="b2batch", batch_system="local", throttle=2, pilot_jobs=0, local_slots=6,
                         shared_data_dir=str(shared)):
        Parallel()(delayed(interval)(str(folder), i, 0.6) for i in range(6))
    times = [json.loads(p.read_text()) for p in folder.glob("*.json")]
    assert len(times) == 6 and most_overlapping(times) == 2, times


@pytest.mark.parametrize("pilot_jobs", [0, 3], ids=["own", "pilots"])
def test_delete_task_file_on_load_counts_only_queued_jobs_in_the_throttle(tmp_path: Path, pilot_jobs: int) -> None:
    # in pilots the calls ride in the queue's entries (no task file): a unit counts as loaded once it runs
    shared = tmp_path / "shared"
    with parallel_config(backend="b2batch", batch_system="local", throttle=1, pilot_jobs=pilot_jobs, local_slots=4,
                         job_shape="pilots" if pilot_jobs else "auto", delete_task_file_on_load=True,
                         shared_data_dir=str(shared)):
        Parallel()(delayed(interval)(str(shared), i, 2.5) for i in range(3))
    times = [json.loads(p.read_text()) for p in shared.glob("*.json")]
    assert len(times) == 3
    assert most_overlapping(times) >= 2, f"running jobs counted in the throttle: {times}"
    assert all(files <= 1 for _s, _e, files in times), "a running job's task file was not deleted"
    assert not [p for p in shared.iterdir() if p.is_dir()], "the batch folder is removed"


# --- nesting ---------------------------------------------------------------------------------------------------

def test_nested_parallel_runs_as_jobs_up_to_max_recursion_level() -> None:
    with parallel_config(backend="b2batch", batch_system="local", max_recursion_level=1):
        outers = Parallel()(delayed(outer)(i) for i in range(2))
    for result in outers:
        pids = {pid for pid, _level in result["inner"]}
        # each inner call is a unit of its own, not run in the outer call's process (units of one pilot may share
        # its runner process: b2batch.engine.pilots.unit_processes)
        assert result["pid"] not in pids and len(result["inner"]) == 3, result
        assert {level for _pid, level in result["inner"]} == {"2"}
    # the inner calls' task files and logs go where the outer call's go, not into the job entry point's folder
    import b2batch.jobscript

    entry = Path(b2batch.jobscript.__file__).parent / "entry"
    assert sorted(p.name for p in entry.iterdir() if p.name != "__pycache__") == ["b2batch_job.py"]


def test_nested_parallel_beyond_max_recursion_level_runs_sequentially_or_fails_clearly() -> None:
    with parallel_config(backend="b2batch", batch_system="local"):  # max_recursion_level=0
        outers = Parallel()(delayed(outer)(i) for i in range(2))
        assert all({pid for pid, _ in r["inner"]} == {r["pid"]} for r in outers), outers
        with pytest.raises(NestingError, match="nesting level 1.*max_recursion_level=0.*max_recursion_level=1"):
            Parallel()(delayed(explicit_nested)(i) for i in range(1))


# --- a job killed from outside ----------------------------------------------------------------------------------

def test_a_job_killed_from_outside_is_submitted_again_then_reported(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    with parallel_config(backend="b2batch", batch_system="local", pilot_jobs=0, max_resubmissions=1):
        started = time.monotonic()
        with pytest.raises(CallJobError) as caught:
            stream = Parallel(return_as="generator")(delayed(write_pid_and_sleep)(str(pids), 60) for _ in range(1))
            for attempt in (1, 2):
                pid_file = wait_for(lambda: list(pids.glob("*.pid")), 60, f"attempt {attempt} to start")[0]
                os.kill(int(pid_file.stem), signal.SIGKILL)
                pid_file.unlink()
            list(stream)
    message = str(caught.value)
    assert time.monotonic() - started < 50
    assert "on local" in message and "killed" in message.lower() and "stderr" in message


# --- joblib's protocol and the parameters ------------------------------------------------------------------------

def test_joblib_protocol_as_its_own_backends() -> None:
    backend = b2batch.joblib.B2BatchBackend()  # constructs without arguments
    with pytest.raises(ValueError, match="n_jobs == 0"):
        backend.effective_n_jobs(0)
    # n_jobs=-1: joblib cuts its batches for JOBLIB_N_JOBS workers (the call asks it for more batches itself,
    # test_the_call_asks_joblib_ahead_...), never for every call at once (the steering memory stays flat)
    assert backend.configure(n_jobs=-1) == options.JOBLIB_N_JOBS and backend.configure(n_jobs=3) == 3
    nested, n_jobs = b2batch.joblib.B2BatchBackend(max_recursion_level=2).get_nested_backend()
    assert isinstance(nested, b2batch.joblib.B2BatchBackend) and nested.level == 1 and n_jobs == -1
    sequential, n_jobs = backend.get_nested_backend()
    assert type(sequential).__name__ == "SequentialBackend" and n_jobs is not None
    throttled = b2batch.joblib.B2BatchBackend(throttle=[5, 2], max_recursion_level=-1)
    assert throttled.options.throttle_at(0, -1) == 5
    assert throttled.get_nested_backend()[0].options.throttle_at(1, -1) == 2
    assert b2batch.joblib.B2BatchBackend().options.throttle_at(0, -1) == options.DEFAULT_THROTTLE
    with pytest.raises(ValueError, match="empty list"):
        b2batch.joblib.B2BatchBackend(throttle=[])
    with pytest.raises(SettingError, match="max_resubmisions.*max_resubmissions"):
        b2batch.joblib.B2BatchBackend(max_resubmisions=3)


def test_tiny_calls_of_n_jobs_minus_1_go_out_in_a_few_full_units(caplog) -> None:
    """joblib hands over a batch only as one ends (n_jobs=-1: 2 x JOBLIB_N_JOBS batches out): once the probes
    timed the calls, the call asks joblib for the rest itself and packs it into a few units, instead of units of
    the few calls joblib keeps out. (Also the tripwire of joblib's private names in one_more_batch: without
    them the call asks for nothing and gets many small units.)"""
    with caplog.at_level(logging.DEBUG, logger="b2batch.joblib.call_batch"), \
            parallel_config(backend="b2batch", batch_system="local"):
        values = Parallel()(delayed(square)(i) for i in range(5000))
    assert values == [i * i for i in range(5000)]
    found = [re.search(r"a unit of (\d+) batch\(es\), (\d+) call\(s\)( \(a probe\))?;", r.getMessage())
             for r in caplog.records]
    units = [(int(m[2]), bool(m[3])) for m in found if m]
    probes, rest = [calls for calls, probe in units if probe], [calls for calls, probe in units if not probe]
    assert probes == [1] * options_probes(), units
    assert sum(probes) + sum(rest) == 5000 and 1 <= len(rest) <= 6 and max(rest) >= 2000, units


def options_probes() -> int:
    from b2batch.joblib.call_batch import PROBE_UNITS

    return PROBE_UNITS


def test_parameters_become_each_systems_settings() -> None:
    o = options.Options(request_cpus=2, request_memory="1Gb", request_disk="2 GB", universe="vanilla",
                        extra_directives={"partition": "long"}, python_path="/opt/py", initial_dir="/tmp")
    slurm = options.job_settings(o, "slurm")
    assert slurm["slurm_settings"] == {"cpus-per-task": 2, "mem": "1024M", "tmp": "2048M", "partition": "long"}
    assert slurm["executable"] == ["/opt/py"] and slurm["working_dir"] == str(Path("/tmp").resolve())
    condor = options.job_settings(options.Options(request_cpus=2, request_memory="1Gb"), "htcondor")
    assert condor["htcondor_settings"] == {"request_cpus": 2, "request_memory": "1Gb"}
    sge = options.job_settings(options.Options(request_cpus=2, request_memory=4096), "sge")["sge_settings"]
    assert sge == {"pe": "smp 2", "resources": {"h_vmem": "2048M"}}
    lsf = options.job_settings(options.Options(request_cpus=2, request_memory="2G"), "lsf")
    assert lsf["job_slots"] == 2 and lsf["lsf_settings"] == {"R": "rusage[mem=2048] span[hosts=1]"}
    assert options.job_settings(options.Options(request_memory="1G", settings={"slurm_settings": {"mem": "3G"}}),
                                "slurm")["slurm_settings"]["mem"] == "3G"  # b2batch's own setting wins
    with pytest.raises(SettingError, match="HTCondor"):
        options.job_settings(options.Options(schedd="schedd.example.org"), "slurm")
    assert options.megabytes("1.5 GiB", "x") == 1536 and options.megabytes(100, "x") == 100
    with pytest.raises(SettingError, match="request_memory"):
        options.megabytes("lots", "request_memory")


def test_export_metadata_writes_the_run_report_and_timeline(tmp_path: Path) -> None:
    with parallel_config(backend="b2batch", batch_system="local", export_metadata=True):
        Parallel()(delayed(square)(i) for i in range(5))
    [report] = (tmp_path / "logs").glob("b2batch-run-*.report.json")
    content = json.loads(report.read_text())
    assert content["totals"]["done"] >= 1 and not content["failed"]
    assert {job["family"] for job in content["jobs"]} == {"square"}
    assert list((tmp_path / "logs").glob("b2batch-run-*.trace.json"))
    assert report.with_name(report.name.replace(".json", ".html")).read_text().count("square(") >= 5  # its page


def test_joblib_htcondor_code_runs_unchanged_on_another_system(workflow) -> None:
    wf = workflow("joblib_calls.py")
    done = wf.run("htcondor", "--settings", json.dumps({"batch_system": "local"}), timeout=120)
    assert json.loads(done.stdout.split("RESULT ", 1)[1])["list"] == [0, 1, 4, 9, 16], done.stderr[-3000:]
    assert (wf.folder / "joblib_htcondor_shared_data").is_dir()
