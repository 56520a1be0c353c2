"""b2luigi's batch worker through the shim: ``python tasks.py --batch-runner --task-id ID`` (the command of
b2luigi's executable wrapper) runs that one task of the graph here and nothing else, ends with b2luigi's
exceptions (an unknown id: ValueError; no id: AttributeError; the task's own error) and exit status 1; a failed
task's outputs are removed (b2batch: they may be partial). ``process(..., batch_runner=True)`` runs the first
task. The differential corpus (``batch_runner_task_id.py``, ``executable_wrapper.py``) compares the same with
b2luigi 1.3.0."""

from __future__ import annotations

from conftest import tree
from conftest import shim_env

PART1, BROKEN, DYNAMIC = "Part_1_f4fe3360f0", "Part__1_d37d5a87d0", "Dynamic__99914b932b"


def test_the_task_of_the_id_runs_and_nothing_else(workflow) -> None:
    flow = workflow("b2luigi_batch_worker.py")
    done = flow.run("--batch-runner", "--task-id", PART1, env=shim_env())
    assert done.returncode == 0, done.stderr
    assert (done.stdout, done.stderr) == ("", "")  # no scheduler, no summary: the job's logs are the task's
    assert tree(flow.folder / "results") == ["n=1/part.txt"]


def test_a_failing_task_ends_with_its_error_and_leaves_no_output(workflow) -> None:
    flow = workflow("b2luigi_batch_worker.py")
    done = flow.run("--batch-runner", "--task-id", BROKEN, env=shim_env())
    assert done.returncode == 1
    assert done.stderr.rstrip().endswith("RuntimeError: a failing part")
    assert "outputs may be partial and do not count: removed" in done.stderr
    assert not (flow.folder / "results" / "n=-1" / "part.txt").exists()


def test_an_unknown_or_missing_id_is_b2luigis_error(workflow) -> None:
    flow = workflow("b2luigi_batch_worker.py")
    unknown = flow.run("--batch-runner", "--task-id", "Part_9_0000000000", env=shim_env())
    assert unknown.returncode == 1
    assert unknown.stderr.rstrip().endswith("ValueError: The task id Part_9_0000000000 to be executed by this batch "
                                            "worker does not exist in the locally reproduced task graph.")
    missing = flow.run("--batch-runner", env=shim_env())
    assert missing.returncode == 1 and "AttributeError: --batch-runner runs one task" in missing.stderr
    assert not (flow.folder / "results").exists()


def test_dynamic_requirements_must_be_complete_and_reach_run(workflow) -> None:
    flow = workflow("b2luigi_batch_worker.py")
    early = flow.run("--batch-runner", "--task-id", DYNAMIC, env=shim_env())
    assert early.returncode == 1 and "requires at run time Part(n=3), which is not complete" in early.stderr
    flow.run("--batch-runner", "--task-id", "Part_3_ab99dd1074", env=shim_env())
    done = flow.run("--batch-runner", "--task-id", DYNAMIC, env=shim_env())
    assert done.returncode == 0, done.stderr
    assert (flow.folder / "results" / "dynamic.txt").read_text() == "3\n"


def test_process_with_batch_runner_runs_the_first_task(workflow) -> None:
    flow = workflow("b2luigi_batch_worker.py")
    done = flow.run("first", env=shim_env())
    assert done.returncode == 0, done.stderr
    assert tree(flow.folder / "results") == ["n=2/part.txt"]
