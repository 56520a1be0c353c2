"""The tripwire on luigi's private names: b2batch uses them in b2batch/luigi_frontend/seam.py and nowhere else.

If one of these tests fails after a luigi upgrade, luigi changed a private part that b2batch relies on: adapt
seam.py (and what uses it) before releasing, do not just update the test.
"""

from __future__ import annotations

import ast
import inspect
import queue
from pathlib import Path
from typing import Any

import luigi
import luigi.execution_summary
import luigi.interface
import luigi.worker
import pytest
from luigi.scheduler import DONE, FAILED

import b2batch
from b2batch.luigi_frontend import seam
from b2batch.luigi_frontend.task_on_node import StatusReporter

SEAM = "luigi changed a private part that b2batch/luigi_frontend/seam.py relies on: "
PACKAGE = Path(b2batch.__file__).parent


def source(function: Any) -> str:
    return inspect.getsource(function)


def private_luigi_names(path: Path) -> set[str]:
    """Private names (``_x``) taken from luigi modules or objects in a source file: attribute accesses on
    names imported from luigi, and ``from luigi... import _x``."""
    tree = ast.parse(path.read_text())
    luigi_names = set()
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            luigi_names |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name.startswith("luigi")}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("luigi"):
            found |= {a.name for a in node.names if a.name.startswith("_")}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in luigi_names:
                found.add(node.attr)
    return found


def test_no_module_but_the_seam_uses_a_private_name_of_luigi() -> None:
    offenders = {}
    for path in PACKAGE.rglob("*.py"):
        if path.name == "seam.py" and path.parent.name == "luigi_frontend":
            continue
        names = private_luigi_names(path)
        if names:
            offenders[str(path.relative_to(PACKAGE))] = sorted(names)
    assert offenders == {}, f"luigi's private names outside luigi_frontend/seam.py: {offenders}"


def test_the_seam_uses_the_private_names_checked_here() -> None:
    used = private_luigi_names(PACKAGE / "luigi_frontend" / "seam.py")
    assert used == {"_summary_dict", "_warn_on_wrong_param_type"}, used
    assert "def _create_task_process" in source(seam.LuigidWorker)


def test_execution_summary_reads_what_the_summary_view_keeps() -> None:
    summary_dict = getattr(luigi.execution_summary, "_summary_dict", None)
    assert summary_dict is not None, SEAM + "execution_summary._summary_dict is gone"
    module = inspect.getsource(luigi.execution_summary)
    for attribute in seam.SUMMARY_ATTRIBUTES:
        assert f"worker.{attribute}" in module, SEAM + f"the execution summary no longer reads worker.{attribute}"
    partition = source(luigi.execution_summary._partition_tasks)
    assert "for (task, status, ext) in task_history" in partition, SEAM + "the history entries changed"
    assert list(inspect.signature(luigi.execution_summary.LuigiRunResult).parameters)[:2] == \
        ["worker", "worker_add_run_status"], SEAM + "LuigiRunResult's constructor changed"
    worker_add = source(luigi.worker.Worker._add_task)
    assert "self._add_task_history.append((task, status, runnable))" in worker_add, \
        SEAM + "luigi's worker keeps its history differently; SummaryView.add must follow"


def test_summary_view_gives_luigis_own_summary_and_status() -> None:
    view = seam.SummaryView()
    done, failed, top = Written(name="a"), Written(name="b"), Final()
    for task in (top, done, failed):
        view.add(task, "PENDING", True)
    view.add(done, DONE, True)
    view.add(failed, FAILED, True)
    result = seam.run_result(view, True)
    assert result.status == luigi.LuigiStatusCode.FAILED
    sets = seam.summary_sets(view)
    assert {t.task_id for t in sets["completed"]} == {done.task_id}
    assert {t.task_id for t in sets["upstream_failure"]} == {top.task_id}
    assert "Scheduled 3 tasks of which" in result.summary_text


def test_worker_creates_task_processes_in_an_overridable_method() -> None:
    create = getattr(luigi.worker.Worker, "_create_task_process", None)
    assert create is not None, SEAM + "Worker._create_task_process is gone"
    assert list(inspect.signature(create).parameters) == ["self", "task"], SEAM + "its signature changed"
    run_task = source(luigi.worker.Worker._run_task)
    assert "self._create_task_process(task)" in run_task, SEAM + "_run_task no longer calls it"
    for used in ("use_multiprocessing", ".start()", "self._running_tasks[task_id]"):
        assert used in run_task, SEAM + f"_run_task no longer uses {used}"
    assert "self._task_result_queue" in source(luigi.worker.Worker.__init__)


@pytest.mark.parametrize("needed", ["is_alive()", "exitcode", "timeout_time", "_task_result_queue.put"])
def test_purge_children_uses_the_process_protocol(needed: str) -> None:
    assert needed in source(luigi.worker.Worker._purge_children), SEAM + f"_purge_children no longer uses {needed}"


def test_handle_next_task_unpacks_five_values() -> None:
    assert "task_id, status, expl, missing, new_requirements = self._task_result_queue.get" in \
        source(luigi.worker.Worker._handle_next_task), SEAM + "the result tuple of a task process changed"


def test_worker_exit_terminates_live_processes() -> None:
    exit_source = source(luigi.worker.Worker.__exit__)
    assert "is_alive()" in exit_source and "terminate()" in exit_source, \
        SEAM + "Worker.__exit__ no longer terminates running task processes (jobs would outlive the run)"


def test_build_accepts_a_worker_scheduler_factory() -> None:
    assert "worker_scheduler_factory" in inspect.signature(luigi.build).parameters
    run = source(luigi.interface._schedule_and_run)
    for call in ("create_local_scheduler()", "create_remote_scheduler(url=", "create_worker(scheduler=",
                 "worker_processes=", "assistant="):
        assert call in run, SEAM + f"_schedule_and_run no longer calls {call}"
    factory = seam.LuigidFactory
    assert list(inspect.signature(factory.create_remote_scheduler).parameters) == ["self", "url"]
    assert list(inspect.signature(factory.create_worker).parameters)[:4] == \
        ["self", "scheduler", "worker_processes", "assistant"]


def test_task_process_constructor_used_by_jobs() -> None:
    parameters = list(inspect.signature(luigi.worker.TaskProcess.__init__).parameters)
    assert parameters[:5] == ["self", "task", "worker_id", "result_queue", "status_reporter"], \
        SEAM + "TaskProcess's constructor changed; seam.run_in_process builds one"
    assert "use_multiprocessing" in parameters


# --- the seam, exercised with real luigi runs -------------------------------------------------------------

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
    """Stands in for luigi's task process the way JobTaskProcess does: started, polled with is_alive(), and
    reporting its result through the worker's result queue."""

    def __init__(self, task: Any, result_queue: Any) -> None:
        self.task, self.result_queue = task, result_queue
        self.use_multiprocessing = True
        self.timeout_time = None
        self.exitcode = 0
        self.polls = 0
        self.reported = False

    def start(self) -> None:
        pass

    def is_alive(self) -> bool:
        self.polls += 1
        if self.polls < 3:
            return True
        if not self.reported:
            self.reported = True
            status, explanation = (FAILED, "the job failed") if isinstance(self.task, Broken) else (DONE, "")
            if status == DONE:
                self.task.run()
            self.result_queue.put((self.task.task_id, status, explanation, [], []))
        return False

    def terminate(self) -> None:
        pass

    def join(self, timeout: float | None = None) -> None:
        pass


def test_luigid_worker_runs_tasks_through_a_job_like_process(tmp_path: Path) -> None:
    started: list[str] = []

    def make(task: Any, result_queue: Any) -> Any:
        started.append(task.task_id)
        return FakeJob(task, result_queue)

    result = luigi.build([Final()], worker_scheduler_factory=seam.LuigidFactory(make), local_scheduler=True,
                         workers=2, detailed_summary=True, log_level="WARNING")
    assert result.status == luigi.LuigiStatusCode.SUCCESS, result.summary_text
    assert (tmp_path / "results" / "final.txt").read_text() == "done"
    assert sorted(started) == sorted(t.task_id for t in (Final(), Written(name="a"), Written(name="b")))
    broken = luigi.build([Broken()], worker_scheduler_factory=seam.LuigidFactory(make), local_scheduler=True,
                         detailed_summary=True, log_level="WARNING")
    assert broken.status == luigi.LuigiStatusCode.FAILED and "1 failed" in broken.summary_text


def test_job_side_task_process_reports_through_a_plain_queue(tmp_path: Path) -> None:
    task = Written(name="inline")
    status, _explanation, missing, new_deps = seam.run_in_process(task, "job", StatusReporter())
    assert (status, missing, new_deps) == (DONE, [], [])
    assert (tmp_path / "results" / "name=inline" / "inline.txt").read_text() == "inline"
    results: queue.Queue[Any] = queue.Queue()  # the queue protocol itself, as run_in_process reads it
    luigi.worker.TaskProcess(task, "job", results, StatusReporter(), use_multiprocessing=False).run()
    assert len(results.get_nowait()) == 5
