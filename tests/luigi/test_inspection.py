"""The ``b2batch`` commands that look at a workflow script without running it: show, tasks, graph, remove,
cleanup (b2luigi's command has show, tasks, graph and remove); run on b2luigi scripts through the shim."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TAB, shim_env

from b2batch.luigi_frontend.inspection import COMMANDS


def b2batch_command(*args: str, cwd: Path, input: str = "") -> subprocess.CompletedProcess[str]:
    """``b2batch ARGS`` started from ``cwd``, the shim importable."""
    return subprocess.run([sys.executable, "-m", "b2batch", *args], cwd=cwd, env=shim_env(), input=input,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def flow(workflow, tmp_path: Path):
    """The b2luigi workflow of test_b2luigi_compat, in a folder of its own; commands start elsewhere."""
    return workflow("b2luigi_compat.py", folder=tmp_path / "flow")


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_answers_help_without_running_anything(command: str, tmp_path: Path) -> None:
    run = b2batch_command(command, "--help", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert f"usage: b2batch {command}" in run.stdout and "script" in run.stdout
    assert list(tmp_path.iterdir()) == []


def test_show_gives_the_dependency_tree_with_each_output_present_or_missing(flow, tmp_path: Path) -> None:
    (flow.folder / "energy=1" / "files=2files").mkdir(parents=True)
    (flow.folder / "energy=1" / "files=2files" / "sim.txt").write_text("made by hand")
    results = f"{flow.folder}/."  # b2luigi's result_dir ".", joined as b2luigi joins it
    run = b2batch_command("show", str(flow.script), cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[1] == "└── ✗ Summary()"
    assert f"    ├── ✗ {results}/summary.txt" in lines
    assert '    ├── ✓ Simulate(energy=1, files=["a.root", "b.root"])' in lines
    assert f"    │   └── ✓ {results}/energy=1/files=2files/sim.txt" in lines
    assert f"        └── ✗ {results}/energy=2/files=2files/sim.txt" in lines
    paths = b2batch_command("show", "--paths", str(flow.script), cwd=tmp_path)
    assert paths.stdout.splitlines() == [f"{results}/summary.txt", f"{results}/energy=1/files=2files/sim.txt",
                                         f"{results}/energy=2/files=2files/sim.txt"]
    assert not (flow.folder / "summary.txt").exists()  # nothing ran


def test_tasks_lists_the_scripts_task_classes_with_their_parameters(flow, tmp_path: Path) -> None:
    run = b2batch_command("tasks", str(flow.script), cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    rows = [line for line in run.stdout.splitlines() if line.startswith("│")]
    cells = [[cell.strip() for cell in row.split("│")[1:3]] for row in rows]
    assert cells == [["Simulate", "energy (IntParameter), files (ListParameter)"], ["Summary", "-"]]


def test_graph_as_a_tree_and_as_graphviz_dot(flow, tmp_path: Path) -> None:
    tree = b2batch_command("graph", "--no-params", str(flow.script), cwd=tmp_path)
    assert tree.stdout.splitlines()[1:] == ["└── ✗ Summary", "    ├── ✗ Simulate", "    └── ✗ Simulate"]
    dot = b2batch_command("graph", "--dot", str(flow.script), cwd=tmp_path)
    assert dot.stdout.startswith("digraph workflow {\n") and dot.stdout.endswith("}\n")
    assert dot.stdout.count(" -> ") == 2
    assert '[label="Simulate(energy=1, files=[\\"a.root\\", \\"b.root\\"])"' in dot.stdout


def test_remove_takes_task_classes_and_asks_first(flow, tmp_path: Path) -> None:
    assert flow.run(env=shim_env()).returncode == 0
    results = flow.folder  # b2luigi's result_dir "."
    refused = b2batch_command("remove", "-t", "Simulate", str(flow.script), cwd=tmp_path, input="n\n")
    assert f"The following task outputs will be removed:\n{TAB}- Simulate\n" in refused.stdout
    assert len(list(results.rglob("sim.txt"))) == 2
    removed = b2batch_command("remove", "-y", "-t", "Simulate", str(flow.script), cwd=tmp_path)
    assert removed.returncode == 0, removed.stderr
    assert "Removed outputs for 2 tasks." in removed.stdout
    assert [p.name for p in results.rglob("*.txt")] == ["summary.txt"]
    unknown = b2batch_command("remove", "-y", "-t", "Nope", str(flow.script), cwd=tmp_path)
    assert unknown.returncode == 1 and "Not in the workflow's graph: Nope" in unknown.stderr


def test_cleanup_removes_the_logs_of_complete_tasks_only(workflow, tmp_path: Path) -> None:
    flow = workflow("b2luigi_dispatch.py", folder=tmp_path / "flow")
    flow.run(env=shim_env())  # Works succeeds, Crash fails: both leave logs
    logs = flow.folder / "logs"
    assert (logs / "Works" / "stdout").is_file() and (logs / "how=segfault" / "Crash" / "stdout").is_file()
    run = b2batch_command("cleanup", "--yes", str(flow.script), cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert f"  {logs / 'Works'}" in run.stdout
    assert not (logs / "Works").exists()
    assert (logs / "how=segfault" / "Crash" / "stdout").is_file()
    again = b2batch_command("cleanup", str(flow.script), cwd=tmp_path)
    assert "Nothing to clean up" in again.stdout


def test_a_script_that_never_calls_process_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "defs.py").write_text("import b2batch\nclass A(b2batch.Task):\n    pass\n")
    run = b2batch_command("graph", str(tmp_path / "defs.py"), cwd=tmp_path)
    assert run.returncode == 1 and "without calling b2batch.process()" in run.stderr
