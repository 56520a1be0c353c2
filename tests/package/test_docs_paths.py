"""The files the docs say a run leaves are where they say, on every batch system.

Docs pages list such files in tables that follow a ``<!-- checked-paths ... -->`` comment, with the columns
``file | batch system | what it is``: each path is written with placeholders (``<task_file_dir>/<Family>/
<task_id>/job.sub``) and each row names the batch systems it holds for (``every``, or a list). These tests
run a real workflow (two tasks submitted together, as a job array where the system has arrays, and one task
alone) on local processes, the HTCondor and LSF emulators, the local Slurm and the local Grid Engine, and find
every documented path among the files the run left.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import WORKFLOWS, clean_env

DOCS = Path(__file__).resolve().parents[2] / "docs"
CLUSTERS = Path(__file__).resolve().parents[1] / "clusters"
MARKER = "<!-- checked-paths"
HEADER = ["file", "batch system", "what it is"]
SYSTEMS = ("local", "htcondor", "lsf", "slurm", "sge")
#: What each placeholder stands for, as a regular expression over a path relative to the workflow's folder
#: (a run with the default task_file_dir and log_dir).
PLACEHOLDERS = {
    "<task_file_dir>": "task_files",
    "<log_dir>": "logs",
    "<Family>": "(?!arrays/)[A-Za-z_][A-Za-z0-9_]*",  # a task family, never the arrays folder
    "<task_id>": "[^/]+",
    "<parameters>": "[^/]+=[^/]+",
    "<array>": "[^/]+",
    "<N>": "[0-9]+",
    "<job id>": "[0-9]+",
    "<time>": "[0-9]{8}-[0-9]{6}(_[0-9]+)?",
}
#: Files of b2batch and of the batch systems that docs pages name: each must be in a checked table.
NAMED_FILES = ("job.sub", "array.sub", "dispatch.sh", "condor.out", "condor.err", "condor.log", "lsf.out",
               "lsf.err", "sge.out", "job.json", "submission.json", "executable_wrapper.sh", "exit_code",
               "result.json")


@dataclass
class Row:
    page: str
    line: int
    paths: list[str]
    systems: tuple[str, ...]

    def __str__(self) -> str:
        return f"docs/{self.page}:{self.line}"


def checked_rows() -> list[Row]:
    """Every row of every checked table of the docs."""
    rows = []
    for page in sorted(DOCS.glob("*.md")):
        lines = page.read_text().splitlines()
        for number, line in enumerate(lines):
            if not line.startswith(MARKER):
                continue
            table = []
            for index in range(number + 1, len(lines)):
                if not lines[index].startswith("|"):
                    break
                table.append((index + 1, [cell.strip() for cell in lines[index].strip("|").split(" | ")]))
            assert table and table[0][1] == HEADER, f"docs/{page.name}:{number + 1}: a checked table needs {HEADER}"
            for at, cells in table[2:]:
                systems = SYSTEMS if cells[1] == "every" else tuple(s.strip() for s in cells[1].split(","))
                rows.append(Row(page.name, at, re.findall(r"`([^`]+)`", cells[0]), systems))
    return rows


def pattern(template: str) -> re.Pattern[str]:
    parts = re.split(r"(<[^>]+>)", template)
    unknown = [p for p in parts if p.startswith("<") and p not in PLACEHOLDERS]
    assert not unknown, f"{template}: unknown placeholder(s) {unknown}; known: {', '.join(PLACEHOLDERS)}"
    return re.compile("".join(PLACEHOLDERS.get(p, re.escape(p)) for p in parts))


def test_the_checked_tables_are_complete_and_readable() -> None:
    rows = checked_rows()
    pages = {row.page for row in rows}
    assert {"troubleshooting.md", "batch.md", "htcondor.md", "lsf.md", "slurm.md", "sge.md"} <= pages, pages
    for row in rows:
        assert row.paths, f"{row}: no path in the file column"
        assert set(row.systems) <= set(SYSTEMS), f"{row}: unknown batch system in {row.systems}"
        for path in row.paths:
            assert path.startswith(("<task_file_dir>/", "<log_dir>/")), f"{row}: {path} is not a full path"
            pattern(path)
    # Every file of a run that a page names is in a checked table, in every place it can be.
    documented = {path.rsplit("/", 1)[1] for row in rows for path in row.paths}
    for page in sorted(DOCS.glob("*.md")):
        for name in sorted({n for n in NAMED_FILES if re.search(rf"`[^`]*\b{re.escape(n)}`", page.read_text())}):
            assert name in documented, f"docs/{page.name} names {name}, which no checked table lists"


def _cluster_up(name: str) -> None:
    if subprocess.run(["bash", str(CLUSTERS / f"{name}.sh"), "status"], capture_output=True).returncode != 0:
        if os.environ.get("CI"):
            pytest.fail(f"the local {name} is not running: tests/run-all.sh starts it")
        pytest.skip(f"the local {name} is not running (bash tests/clusters/{name}.sh start)")


def run_workflow(system: str, folder: Path) -> set[str]:
    """Run experience.py with two parts (submitted together) and a total (alone) on ``system`` in
    ``folder``; the files it left, relative to ``folder``."""
    folder.mkdir(parents=True)
    (folder / "experience.py").write_text((WORKFLOWS / "experience.py").read_text())
    (folder / "settings.json").write_text(json.dumps({"poll_interval": 0.3, "max_poll_interval": 1}))
    command = [sys.executable, "experience.py", "--batch", "--batch-system", system, "--count", "2"]
    if system in ("htcondor", "lsf"):
        command = [sys.executable, "-m", "b2batch", "emulate", system, "--", *command]
    env = clean_env(B2BATCH_EMULATOR_DIR=str(folder.parent / f"{system}-emulator"))
    done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-3000:]
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize("system", [
    "local", "htcondor", "lsf",
    pytest.param("slurm", marks=[pytest.mark.slow, pytest.mark.slurm]),
    pytest.param("sge", marks=[pytest.mark.slow, pytest.mark.sge]),
])
def test_every_documented_path_is_there_after_a_run(system: str, tmp_path: Path) -> None:
    if system in ("slurm", "sge"):
        _cluster_up(system)
    files = run_workflow(system, tmp_path / "project")
    rows = [row for row in checked_rows() if system in row.systems]
    assert rows, f"no checked path for {system}"
    missing = [f"{row}: {path}" for row in rows for path in row.paths
               if not any(pattern(path).fullmatch(f) for f in files)]
    assert not missing, "documented but not there after a run on " + system + ":\n  " + "\n  ".join(
        missing) + "\nthe run left:\n  " + "\n  ".join(sorted(files))
    # A job array's files are in its own folder, not in a task's job folder, and the other way round.
    if system != "local":
        assert any(f.startswith("task_files/arrays/") for f in files)
