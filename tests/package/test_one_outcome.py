"""Tripwire (issue 41, must-have 3): how a job ended is decided in one place, the engine's JobOutcome.

Read with ``ast``: the exit-code file is read by ``JobFiles.read_exit_code`` (``engine/files.py``), which only
``engine/outcome.py`` calls; no module joins the file's name to a path itself (``folder / "exit_code"``: use
``outcome.has_ended``); and no front-end calls the outcome module's readers of a job's files (``written_exit_code``,
``status_of_files``, ``has_ended``, ``ended_at``): front-ends read ``job.outcome`` or ``last_outcome(files)``.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "b2batch"
FILES, OUTCOME = "b2batch.engine.files", "b2batch.engine.outcome"
FRONT_ENDS = ("b2batch.luigi_frontend", "b2batch.calls", "b2batch.joblib", "b2batch.pool", "b2batch.farm",
              "b2batch.compat")
FILE_READERS = {"written_exit_code", "status_of_files", "has_ended", "ended_at"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def findings(name: str, path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if called == "read_exit_code" and name not in (FILES, OUTCOME):
                found.append(f"{name}:{node.lineno} reads the exit-code file (use the job's outcome)")
            if called in FILE_READERS and name.startswith(FRONT_ENDS):
                found.append(f"{name}:{node.lineno} judges a job by its files (read job.outcome)")
        elif (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and isinstance(node.right, ast.Constant)
              and node.right.value == "exit_code" and name != FILES):
            found.append(f"{name}:{node.lineno} joins the exit-code file's name itself (use outcome.has_ended)")
    return found


def test_the_exit_code_file_is_read_in_one_place_and_front_ends_read_the_outcome() -> None:
    found = [line for name, path in MODULES.items() for line in findings(name, path)]
    assert found == []


def test_the_tripwire_sees_a_reading(tmp_path: Path) -> None:
    module = tmp_path / "made_up.py"
    module.write_text("def f(job, folder):\n    return job.files.read_exit_code(), (folder / 'exit_code').exists()\n")
    assert len(findings("b2batch.systems.made_up", module)) == 2
    assert len(findings("b2batch.farm.made_up", module)) == 2
