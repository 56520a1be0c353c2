"""The private parts of luigi that b2batch relies on (b2batch/worker.py, b2batch/process.py, b2batch/job.py).

If one of these tests fails after a luigi upgrade, luigi changed its worker: adapt b2batch/worker.py and
BatchProcess (b2batch/process.py) before releasing, do not just update the test.
"""

from __future__ import annotations

import inspect
import queue
from pathlib import Path
from typing import Any, ClassVar

import luigi
import luigi.execution_summary
import luigi.interface
import luigi.worker
import pytest
from luigi.scheduler import DONE, FAILED

import b2batch
from b2batch.job import _StatusReporter
from b2batch.process import BatchProcess
from b2batch.worker import BatchWorker, BatchWorkerSchedulerFactory

SEAM = "luigi changed a private part of its worker that b2batch/worker.py relies on: "


def source(function: Any) -> str:
    return inspect.getsource(function)


def test_worker_creates_task_processes_in_an_overridable_method() -> None:
    create = getattr(luigi.worker.Worker, "_create_task_process", None)
    assert create is not None, SEAM + "Worker._create_task_process is gone"
    assert list(inspect.signature(create).parameters) == ["self", "task"], SEAM + "its signature changed"
    run_task = source(luigi.worker.Worker._run_task)
    assert "self._create_task_process(task)" in run_task, SEAM + "_run_task no longer calls it"
    for used in ("use_multiprocessing", ".start()", "self._running_tasks[task_id]"):
        assert used in run_task, SEAM + f"_run_task no longer uses {used}"


CHECKED_SEAMS = {"_create_task_process", "_handle_next_task", "_purge_children", "_get_work"}  # private methods of luigi's Worker overridden, checked in this file


def test_batch_worker_overrides_no_unchecked_worker_method() -> None:
    overridden = {name for name in vars(BatchWorker) if hasattr(luigi.worker.Worker, name)
                  and not name.startswith("__")}
    assert overridden <= CHECKED_SEAMS, \
        f"BatchWorker overrides {sorted(overridden - CHECKED_SEAMS)} of luigi's Worker: add checks of what it " \
        f"relies on to tests/test_luigi_seam.py and the name to CHECKED_SEAMS"
    assert {"_create_task_process", "_handle_next_task", "_purge_children", "_get_work"} <= overridden
    create = source(BatchWorker._create_task_process)
    for attribute in ("self._scheduler", "self._task_result_queue", "self._config.timeout"):
        assert attribute in create
        name = attribute.split(".")[1]
        assert f"self.{name}" in source(luigi.worker.Worker.__init__), SEAM + f"Worker.__init__ has no {name}"


@pytest.mark.parametrize("needed", ["is_alive()", "exitcode", "timeout_time", "_task_result_queue.put"])
def test_purge_children_uses_the_process_protocol(needed: str) -> None:
    assert needed in source(luigi.worker.Worker._purge_children), \
        SEAM + f"_purge_children no longer uses {needed}"


@pytest.mark.parametrize("needed", ["_purge_children()", "_task_result_queue.get", "new_requirements",
                                    "self._running_tasks"])
def test_handle_next_task_reads_results_from_the_queue(needed: str) -> None:
    assert needed in source(luigi.worker.Worker._handle_next_task), \
        SEAM + f"_handle_next_task no longer uses {needed}"


def test_handle_next_task_unpacks_five_values() -> None:
    assert "task_id, status, expl, missing, new_requirements = self._task_result_queue.get" in \
        source(luigi.worker.Worker._handle_next_task), SEAM + "the result tuple put by BatchProcess._report changed"


def test_handle_next_task_purges_first_and_handles_one_result_per_call() -> None:
    """BatchWorker handles the other queued results by calling it again with the purge skipped."""
    handle = source(luigi.worker.Worker._handle_next_task)
    assert handle.index("self._purge_children()") < handle.index("self._task_result_queue.get("), \
        SEAM + "_handle_next_task no longer purges before reading a result"
    assert "self._running_tasks.pop(task_id)" in handle and handle.rstrip().endswith("return"), \
        SEAM + "_handle_next_task no longer handles exactly one result per call"
    assert list(inspect.signature(luigi.worker.Worker._purge_children).parameters) == ["self"]


def test_get_work_history_is_only_read_by_the_execution_summary() -> None:
    """BatchWorker keeps only the entries of _get_work_response_history the execution summary reads."""
    get_work = source(luigi.worker.Worker._get_work)
    assert "self._get_work_response_history.append(" in get_work, SEAM + "_get_work no longer keeps its history"
    for key in ('"task_id": task_id', '"running_tasks": running_tasks'):
        assert key in get_work, SEAM + f"the history entries changed ({key})"
    external = source(luigi.execution_summary._get_external_workers)
    for read in ('get_work_response["task_id"] is None', 'get_work_response["running_tasks"]',
                 'running_task["worker"]', 'running_task["task_id"]', "other_worker_id == worker._id"):
        assert read in external, SEAM + f"the execution summary reads the history differently ({read})"
    luigi_files = Path(luigi.__file__).parent
    readers = [path.name for path in luigi_files.glob("*.py") if "_get_work_response_history" in path.read_text()]
    assert sorted(readers) == ["execution_summary.py", "worker.py"], \
        SEAM + f"more of luigi uses _get_work_response_history: {readers}"


def test_worker_exit_terminates_live_processes() -> None:
    exit_source = source(luigi.worker.Worker.__exit__)
    assert "is_alive()" in exit_source and "terminate()" in exit_source, \
        SEAM + "Worker.__exit__ no longer terminates running task processes (jobs would outlive the run)"


def test_build_accepts_a_worker_scheduler_factory() -> None:
    assert "worker_scheduler_factory" in inspect.signature(luigi.build).parameters, \
        SEAM + "luigi.build has no worker_scheduler_factory any more"
    run = source(luigi.interface._schedule_and_run)
    for call in ("create_local_scheduler()", "create_remote_scheduler(url=", "create_worker(scheduler=",
                 "worker_processes=", "assistant="):
        assert call in run, SEAM + f"_schedule_and_run no longer calls {call}"
    factory = BatchWorkerSchedulerFactory
    assert list(inspect.signature(factory.create_remote_scheduler).parameters) == ["self", "url"]
    assert list(inspect.signature(factory.create_worker).parameters)[:4] == \
        ["self", "scheduler", "worker_processes", "assistant"]


def test_task_process_constructor_used_by_jobs() -> None:
    parameters = list(inspect.signature(luigi.worker.TaskProcess.__init__).parameters)
    assert parameters[:5] == ["self", "task", "worker_id", "result_queue", "status_reporter"], \
        SEAM + "TaskProcess's constructor changed; b2batch/job.py builds one"
    assert "use_multiprocessing" in parameters


# --- the protocol, exercised with a real luigi run -----------------------------------------------------------

class Written(b2batch.Task):
    name = b2batch.Parameter()

    def output(self):
        yield self.add_to_output(f"{self.name}.txt")

    def run(self):
        Path(self.get_output_file_name(f"{self.name}.txt")).write_text(self.name)


class Broken(b2batch.Task):
    def output(self):
        yield self.add_to_output("never")


class Final(b2batch.Task):
    def requires(self):
        return [Written(name="a"), Written(name="b")]

    def output(self):
        yield self.add_to_output("final.txt")

    def run(self):
        Path(self.get_output_file_name("final.txt")).write_text("done")


class FakeJob:
    """Stands in for luigi's TaskProcess the way BatchProcess does: started, polled with is_alive(), and
    reporting its result through the worker's result queue."""

    log: ClassVar[list[str]] = []

    def __init__(self, task: Any, result_queue: Any) -> None:
        self.task, self.result_queue = task, result_queue
        self.use_multiprocessing = True
        self.timeout_time = None
        self.exitcode: int | None = None
        self.polls = 0

    def start(self) -> None:
        FakeJob.log.append(f"start {self.task.task_id}")

    def is_alive(self) -> bool:
        self.polls += 1
        if self.polls < 3:
            return True  # still running on the "batch system"
        if self.exitcode is None:
            status, explanation = DONE, ""
            if isinstance(self.task, Broken):
                status, explanation = FAILED, "the job failed"
            else:
                self.task.run()
            self.exitcode = 0
            self.result_queue.put((self.task.task_id, status, explanation, [], []))
        return False

    def terminate(self) -> None:
        FakeJob.log.append(f"terminate {self.task.task_id}")

    def join(self, timeout: float | None = None) -> None:
        pass


class FakeWorker(luigi.worker.Worker):
    def _create_task_process(self, task: Any) -> FakeJob:
        return FakeJob(task, self._task_result_queue)


class FakeFactory(BatchWorkerSchedulerFactory):
    def create_worker(self, scheduler: Any, worker_processes: int, assistant: bool = False) -> FakeWorker:
        return FakeWorker(scheduler=scheduler, worker_processes=worker_processes, assistant=assistant,
                          wait_interval=0.05)


def test_luigi_runs_tasks_through_a_process_like_batch_process(tmp_path: Path) -> None:
    FakeJob.log.clear()
    result = luigi.build([Final()], worker_scheduler_factory=FakeFactory(), local_scheduler=True, workers=2,
                         detailed_summary=True, log_level="WARNING")
    assert result.status == luigi.LuigiStatusCode.SUCCESS, result.summary_text
    assert (tmp_path / "results" / "final.txt").read_text() == "done"
    assert sorted(FakeJob.log) == sorted(f"start {t.task_id}" for t in (Final(), Written(name="a"),
                                                                      Written(name="b")))


def test_a_failure_reported_through_the_queue_fails_the_task_once() -> None:
    result = luigi.build([Broken()], worker_scheduler_factory=FakeFactory(), local_scheduler=True, workers=1,
                         detailed_summary=True, log_level="WARNING")
    assert result.status == luigi.LuigiStatusCode.FAILED
    failed = result.summary_text
    assert "1 failed" in failed and "Broken()" in failed


def test_job_side_task_process_reports_through_a_plain_queue(tmp_path: Path) -> None:
    """b2batch/job.py runs luigi's TaskProcess in-line and reads its result tuple."""
    results: queue.Queue[Any] = queue.Queue()
    task = Written(name="inline")
    luigi.worker.TaskProcess(task, "job", results, _StatusReporter(), use_multiprocessing=False).run()
    task_id, status, _explanation, missing, new_deps = results.get_nowait()
    assert (task_id, status, missing, new_deps or []) == (task.task_id, DONE, [], [])
    assert (tmp_path / "results" / "name=inline" / "inline.txt").read_text() == "inline"


def test_batch_process_offers_what_luigi_uses(tmp_path: Path) -> None:
    class Minimal(BatchProcess):
        system_name = "minimal"

        def start_job(self) -> None: ...

        def get_job_status(self) -> Any: ...

        def kill_job(self) -> None: ...

    process = Minimal(task=Written(name="x"), scheduler=None, result_queue=queue.Queue(), worker_timeout=None)
    for name in ("start", "run", "is_alive", "terminate", "join"):
        assert callable(getattr(process, name))
    assert process.timeout_time is None  # luigi's _purge_children would terminate it otherwise
    assert process.use_multiprocessing is True  # luigi's _run_task calls start(), not run()
    assert process.exitcode is None
    assert hasattr(process, "pid")


# --- BatchWorker's changes for runs of thousands of jobs -----------------------------------------------------

class CountingBatchWorker(BatchWorker):
    def _create_task_process(self, task: Any) -> FakeJob:
        job = FakeJob(task, self._task_result_queue)
        self.jobs.append(job)
        return job


class CountingFactory(BatchWorkerSchedulerFactory):
    def create_worker(self, scheduler: Any, worker_processes: int, assistant: bool = False) -> BatchWorker:
        worker = CountingBatchWorker(scheduler=scheduler, worker_processes=worker_processes, assistant=assistant,
                                     wait_interval=0.05)
        worker.jobs = []
        CountingFactory.worker = worker
        return worker


class Many(b2batch.Task):
    n = b2batch.IntParameter()

    def requires(self):
        return [Written(name=f"w{i}") for i in range(self.n)]

    def output(self):
        yield self.add_to_output("many.txt")

    def run(self):
        Path(self.get_output_file_name("many.txt")).write_text("done")


def test_results_of_one_pass_are_handled_without_a_pass_each(tmp_path: Path) -> None:
    """N jobs that end together cost about N is_alive() calls more, not N * N / 2 (a pass per result)."""
    n = 40
    result = luigi.build([Many(n=n)], worker_scheduler_factory=CountingFactory(), local_scheduler=True,
                         workers=n + 1, detailed_summary=True, log_level="WARNING")
    assert result.status == luigi.LuigiStatusCode.SUCCESS, result.summary_text
    polls = sum(job.polls for job in CountingFactory.worker.jobs if not isinstance(job.task, Many))
    assert polls <= 5 * n, f"{polls} is_alive() calls for {n} jobs: a pass over all jobs for each result?"
    assert Many(n=n).complete()


class ScriptedScheduler:
    """Answers get_work like luigi's scheduler while other workers run tasks."""

    def __init__(self, answers: list[dict[str, Any]]) -> None:
        self.answers = answers

    def get_work(self, **kwargs: Any) -> dict[str, Any]:
        return self.answers.pop(0)


def test_get_work_history_keeps_other_workers_tasks_once(tmp_path: Path) -> None:
    def answer(*running: tuple[str, str]) -> dict[str, Any]:
        return {"task_id": None, "n_pending_tasks": 1, "n_unique_pending": 0,
                "running_tasks": [{"task_id": task_id, "worker": who} for who, task_id in running]}

    worker = BatchWorker(scheduler=ScriptedScheduler([]), worker_id="me")
    mine = [("me", f"Mine_{i}") for i in range(500)]
    other_task = Written(name="elsewhere")
    worker._scheduled_tasks[other_task.task_id] = other_task
    worker._scheduler.answers = [answer(*mine, ("other", other_task.task_id)) for _ in range(50)]
    worker._scheduler.answers.append(answer(*mine))
    for _ in range(51):
        worker._get_work()
    history = worker._get_work_response_history
    assert sum(len(entry["running_tasks"]) for entry in history) == 1, "the worker's own tasks were kept"
    assert luigi.execution_summary._get_run_by_other_worker(worker) == {other_task}
