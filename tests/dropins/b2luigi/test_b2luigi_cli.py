"""The ``b2luigi`` command of the shim (``b2luigi.cli``): its subcommands side by side with the
real b2luigi 1.3.0's command (``tests/peers``) on the same project (texts, exit codes, files), and its pieces in
this process (b2luigi's module paths, parameters, task names). ``b2luigi run --batch`` runs local jobs."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytest.importorskip("typer")  # the shim's dependency (compat/b2luigi-shim/pyproject.toml)

from peers import peer_python
from conftest import peer_env, shim_env

TASKS = textwrap.dedent('''\
    import b2luigi


    class LeafTask(b2luigi.Task):
        """Writes its split."""
        split = b2luigi.IntParameter()

        def output(self):
            yield self.add_to_output("leaf.txt")

        def run(self):
            with open(self.get_output_file_name("leaf.txt"), "w") as f:
                f.write(str(self.split))


    class RootTask(b2luigi.Task):
        """Needs the leaf."""
        split = b2luigi.IntParameter()

        def requires(self):
            return LeafTask(split=self.split)

        def output(self):
            yield self.add_to_output("root.txt")

        def run(self):
            with open(self.get_output_file_name("root.txt"), "w") as f:
                f.write("root")
    ''')
PARAMETERS = "config = {'split': 3}\n"
SWEEP = "from b2luigi import ParameterGenerator\nconfig = {'split': ParameterGenerator([1, 2])}\n"

#: Our command in a fresh interpreter, named ``b2luigi`` as the console script is.
OURS = "import sys; sys.argv[0] = 'b2luigi'; from b2luigi.cli import main; main()"


def project(folder: Path, parameters: str = PARAMETERS) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tasks.py").write_text(TASKS)
    (folder / "parameters.py").write_text(parameters)
    return folder


def ours(folder: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**shim_env(), "NO_COLOR": "1", "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-c", OURS, *args], cwd=folder, env=env, capture_output=True, text=True,
                          timeout=120)


def theirs(folder: Path, *args: str) -> subprocess.CompletedProcess:
    python = peer_python("b2luigi")
    env = peer_env(NO_COLOR="1", COLUMNS="200")
    return subprocess.run([str(python.parent / "b2luigi"), *args], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=120)


def _same_text(text: str, folder: Path) -> str:
    """The output with the project folder and panel widths made comparable."""
    text = text.replace(str(folder), "<project>")
    return re.sub(r"[─━]+", "─", re.sub(r" +", " ", text))


#: Subcommands whose texts, exit codes and files must be b2luigi's (each on a fresh copy of the project).
CASES = {
    "show": ["show"],
    "show-named": ["show", "LeafTask"],
    "show-paths": ["show", "RootTask", "--with-requirements", "--paths"],
    "show-unknown": ["show", "LeafTsk"],
    "show-bad-param": ["show", "LeafTask", "--param", "splt=4"],
    "tasks": ["tasks"],
    "graph-dot": ["graph", "--format", "dot", "--params", "--status"],
    "graph-summary": ["graph", "--summary"],
    "graph-conflict": ["graph", "--summary", "--format", "dot"],
    "remove": ["remove", "LeafTask", "-y"],
    "missing-task-file": ["show", "--task-file", "nothing.py"],
    "run-dry": ["run", "RootTask", "--dry"],
    "run-bad-param": ["run", "LeafTask", "--param", "x=1", "--dry"],
    "graph-tree": ["graph", "RootTask", "--status", "--params"],
    "tasks-info": ["tasks", "info", "RootTask"],
    "cleanup": ["cleanup", "RootTask", "--with-requirements", "-y"],
    "init": ["init"],
}


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple]:
    """Each case run by b2luigi 1.3.0 and by the shim, each in its own copy of the project (with the leaf's
    output there already, so that ✓, removal and the dry run have something to show)."""
    peer_python("b2luigi")  # skip (or fail under the test command) before starting anything
    runs = {}
    with ThreadPoolExecutor(max_workers=8) as pool:
        for name, args in CASES.items():
            for side, call in (("theirs", theirs), ("ours", ours)):
                folder = project(tmp_path_factory.mktemp(f"{side}-{name}"))
                (folder / "split=3").mkdir()
                (folder / "split=3" / "leaf.txt").write_text("3")
                runs[name, side] = (folder, pool.submit(call, folder, *args))
    return {key: (folder, future.result()) for key, (folder, future) in runs.items()}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_subcommand_answers_as_b2luigis(case: str, both: dict[str, tuple]) -> None:
    (their_folder, their), (our_folder, our) = both[case, "theirs"], both[case, "ours"]
    assert our.returncode == their.returncode, (our.stdout + our.stderr, their.stdout + their.stderr)
    assert _same_text(our.stdout, our_folder) == _same_text(their.stdout, their_folder), our.stderr
    if their.returncode:
        assert "Error:" in our.stdout and "Error:" in their.stdout
    their_files = sorted(str(p.relative_to(their_folder)) for p in their_folder.rglob("*") if "__pycache__" not in str(p))
    our_files = sorted(str(p.relative_to(our_folder)) for p in our_folder.rglob("*") if "__pycache__" not in str(p))
    assert our_files == their_files


def test_run_makes_the_files_b2luigis_run_makes(tmp_path: Path) -> None:
    ran = ours(project(tmp_path / "ours"), "run", "RootTask")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert (tmp_path / "ours" / "split=3" / "root.txt").read_text() == "root"
    assert (tmp_path / "ours" / "split=3" / "leaf.txt").read_text() == "3"


def test_run_batch_sends_each_combination_as_a_job_that_loads_the_task_file(tmp_path: Path) -> None:
    """``tasks.py`` is loaded as ``TaskClasses``, a name no job can import: the job loads the file."""
    folder = project(tmp_path, SWEEP)
    (folder / "settings.json").write_text('{"batch_system": "test"}')
    ran = ours(folder, "run", "LeafTask", "--batch")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "submitted task LeafTask" in ran.stderr
    assert [(folder / f"split={n}" / "leaf.txt").read_text() for n in (1, 2)] == ["1", "2"]


# --- in this process ------------------------------------------------------------------------------------------

def test_b2luigis_cli_module_paths_are_b2batchs_modules_not_copies(b2luigi) -> None:
    from b2luigi.cli import runner, utils
    from b2luigi.cli.apps import show
    from b2luigi.cli.errors import CliUserError
    from b2luigi.cli.parameter_generator import ParameterGenerator

    import b2luigi.cli.apps.show as our_show
    import b2luigi.cli.runner as our_runner

    assert runner is our_runner and show is our_show and utils.CliUserError is CliUserError
    assert ParameterGenerator is b2luigi.ParameterGenerator
    assert str(CliUserError("bad")) == "bad" and CliUserError("bad").exit_code == 2


def test_parameters_and_task_names_as_b2luigi_reads_them(b2luigi, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from b2luigi.cli.errors import CliUserError
    from b2luigi.cli.utils import build_task_index, expand_parameters, parse_kv_params, resolve_defaults

    assert parse_kv_params(["a=1", "b=[1, 2]", "c=text", "d=x=y"]) == {"a": 1, "b": [1, 2], "c": "text", "d": "x=y"}
    with pytest.raises(CliUserError, match="Invalid --param 'a'. Use key=value."):
        parse_kv_params(["a"])
    with pytest.raises(CliUserError, match=r"^ParameterGenerator requires at least one value\.$"):
        b2luigi.ParameterGenerator([])
    sweep = {"x": b2luigi.ParameterGenerator([1, 2]), "y": 0}
    assert expand_parameters(sweep) == [{"x": 1, "y": 0}, {"x": 2, "y": 0}]
    monkeypatch.setenv("B2LUIGI_TASK_FILE", "mine.py")
    assert resolve_defaults(None, None).task_file == "mine.py"
    monkeypatch.chdir(project(tmp_path))
    index = build_task_index("tasks.py")
    assert sorted(index.manifest) == ["LeafTask", "RootTask"]
    with pytest.raises(CliUserError, match=r"Unknown task 'LeafTsk'. Did you mean 'LeafTask'\? Use 'b2luigi tasks'"):
        index.resolve("LeafTsk")


def test_a_replaced_runner_console_gets_what_the_command_prints(monkeypatch: pytest.MonkeyPatch) -> None:
    """b2luigi's ``runner.console`` and ``runner.stderr_console`` (b2luigi's users replace them to capture the
    output) are where ``render``, ``removal`` and ``params`` print, though those no longer import ``runner``."""
    import io

    from rich.console import Console

    from b2luigi.cli import params, removal, render, runner

    out, err = Console(file=io.StringIO(), width=100), Console(file=io.StringIO(), width=100)
    monkeypatch.setattr(runner, "console", out)
    monkeypatch.setattr(runner, "stderr_console", err)
    assert render._console() is out and removal._console() is out and runner.console is out
    params.warn_ignored_params(["colour"], "MyTask")
    render.render_task_list([])
    assert "ignoring parameters not declared by MyTask: colour" in err.file.getvalue()
    monkeypatch.undo()
    assert runner.console is not out and render._console() is runner.console
