"""``b2luigi test`` of the shim (``b2luigi.cli.apps.test``, ``cli.fast_test``): side by side with the
real b2luigi 1.3.0's command (``tests/peers``) on the same scripts (exit codes, texts, files), its task classes in
this process, and ``--batch`` with a job of (emulated) HTCondor that rebuilds the task on the node."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytest.importorskip("typer")  # the shim's dependency (compat/b2luigi-shim/pyproject.toml)

import luigi  # noqa: E402

from b2luigi.cli import fast_test  # noqa: E402
from b2luigi.cli.errors import CliUserError  # noqa: E402
from b2luigi.core.settings import get_setting, set_setting, with_new_settings  # noqa: E402
from b2luigi.core.utils import create_cmd_from_task  # noqa: E402
from b2batch import settings  # noqa: E402
from b2batch.luigi_frontend import flags  # noqa: E402
from peers import peer_python  # noqa: E402
from test_b2luigi_cli import _same_text, ours, theirs  # noqa: E402

#: The scripts the cases run: each takes -o (and -i), as ``b2luigi test`` calls them.
SCRIPTS = {
    "writes.py": """\
        import argparse, pathlib
        p = argparse.ArgumentParser(); p.add_argument("-o"); p.add_argument("-i")
        a, rest = p.parse_known_args()
        pathlib.Path(a.o).parent.mkdir(parents=True, exist_ok=True)
        text = pathlib.Path(a.i).read_text() if a.i else "done"
        pathlib.Path(a.o).write_text(text + "|" + " ".join(rest))
        """,
    "silent.py": "import sys\n",
    "fails_after_output.py": """\
        import pathlib, sys
        pathlib.Path(sys.argv[sys.argv.index("-o") + 1]).write_text("partial")
        sys.exit(3)
        """,
}

#: Command lines whose exit codes, stdout and files must be b2luigi's.
CASES = {
    "plain": ["-s", "writes.py", "-o", "result.txt"],
    "extra-args": ["-s", "writes.py", "-o", "result.txt", "--", "--lr", "0.01"],
    "executable": ["-s", "writes.py", "-o", "result.txt", "--executable", sys.executable, "--", "--lr"],
    "input-in-folder": ["-s", "writes.py", "-o", "out/result.txt", "-i", "data/input.txt", "--force"],
    "nested-under-result-dir": ["-s", "writes.py", "-o", "result.txt", "--no-literal-path",
                                "--setting", "result_dir=custom"],
    "missing-output": ["-s", "silent.py", "-o", "result.txt"],
    "fails-after-output": ["-s", "fails_after_output.py", "-o", "result.txt"],
    "missing-input": ["-s", "writes.py", "-o", "result.txt", "-i", "nothing.txt"],
    "unknown-batch-system": ["-s", "writes.py", "-o", "result.txt", "--batch-system", "slrum"],
    "unparsable-executable": ["-s", "writes.py", "-o", "result.txt", "--executable", "basf2 'oops"],
    "blank-executable": ["-s", "writes.py", "-o", "result.txt", "--executable", "  "],
    "missing-executable": ["-s", "writes.py", "-o", "result.txt", "--executable", "no-such-binary-h2"],
    "no-output-option": ["-s", "writes.py"],
    "help": ["--help"],
}


def scripts(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in SCRIPTS.items():
        (folder / name).write_text(textwrap.dedent(text))
    (folder / "data").mkdir()
    (folder / "data" / "input.txt").write_text("seed")
    return folder


def _files(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): p.read_text().replace(str(folder), "<project>") for p in folder.rglob("*")
            if p.is_file() and "__pycache__" not in str(p) and p.name not in SCRIPTS and p.parent.name != "data"}


def _last_line(text: str, folder: Path) -> str:
    lines = [line for line in text.replace(str(folder), "<project>").splitlines() if line.strip()]
    return next((line for line in reversed(lines) if "Error" in line), "")


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], tuple[Path, subprocess.CompletedProcess]]:
    """Each case run by b2luigi 1.3.0 and by the shim, each in a folder of its own."""
    peer_python("b2luigi")  # skip (or fail under the test command) before starting anything
    runs = {}
    with ThreadPoolExecutor(max_workers=8) as pool:
        for name, args in CASES.items():
            for side, call in (("theirs", theirs), ("ours", ours)):
                folder = scripts(tmp_path_factory.mktemp(f"{side}-{name}"))
                runs[name, side] = (folder, pool.submit(call, folder, "test", *args))
    return {key: (folder, future.result()) for key, (folder, future) in runs.items()}



def _without_test_base() -> dict[str, str]:
    """This process's environment without the base folder the ``isolated`` fixture names for in-process code
    (``$B2BATCH_BASE_DIR``): a workflow started from another folder lays its files out beside its own script."""
    return {k: v for k, v in os.environ.items() if k != "B2BATCH_BASE_DIR"}


@pytest.mark.parametrize("case", sorted(CASES))
def test_b2luigi_test_answers_as_b2luigis(case: str, both: dict) -> None:
    (their_folder, their), (our_folder, our) = both[case, "theirs"], both[case, "ours"]
    assert our.returncode == their.returncode, (our.stdout + our.stderr, their.stdout + their.stderr)
    assert _same_text(our.stdout, our_folder) == _same_text(their.stdout, their_folder), our.stderr
    assert _files(our_folder) == _files(their_folder)
    # A failed task: luigi's traceback ends in the same error (the script, its exit code or missing output).
    assert _last_line(our.stderr, our_folder) == _last_line(their.stderr, their_folder)


def test_the_cases_cover_success_and_each_kind_of_failure(both: dict) -> None:
    codes = {name: both[name, "theirs"][1].returncode for name in CASES}
    assert codes["plain"] == 0 and codes["missing-output"] == 1 and codes["unknown-batch-system"] == 2
    assert "Did you mean 'slurm'?" in both["unknown-batch-system", "ours"][1].stdout


def test_a_second_run_is_skipped_and_force_runs_again(tmp_path: Path) -> None:
    folder = scripts(tmp_path)
    (folder / "count.py").write_text(textwrap.dedent("""\
        import pathlib, sys
        counter = pathlib.Path("counter.txt")
        counter.write_text(str(int(counter.read_text()) + 1 if counter.exists() else 1))
        pathlib.Path(sys.argv[sys.argv.index("-o") + 1]).write_text("done")
        """))
    for args, count in (([], "1"), ([], "1"), (["--force"], "2")):
        ran = ours(folder, "test", "-s", "count.py", "-o", "result.txt", *args)
        assert ran.returncode == 0, ran.stderr
        assert (folder / "counter.txt").read_text() == count


# --- the task classes, in this process --------------------------------------------------------------------------

@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with the scripts, as the working directory, under b2luigi's profile (the shim's)."""
    monkeypatch.chdir(scripts(tmp_path))
    settings.use_profile("b2luigi")  # conftest's isolation puts b2batch's back afterwards
    return tmp_path


def test_the_worker_encoding_survives_the_wrappers_shell_line(in_tmp: Path) -> None:
    task = fast_test._build_fast_task("my script.py", "my out.txt", "my in.txt", True, True, ["two words", "--x"],
                                      executable="apptainer exec img.sif basf2")
    with with_new_settings():
        set_setting("__batch_runner_use_cli", True)
        words = shlex.split(" ".join(create_cmd_from_task(task())))
    assert words[words.index("batch-runner") - 1:][:1] == ["b2luigi"]
    assert words[words.index("--script") + 1] == str(in_tmp / "my script.py")
    assert words[words.index("--output-file") + 1] == str(in_tmp / "my out.txt")
    assert words[words.index("--input-file") + 1] == str(in_tmp / "my in.txt")
    assert [words[i + 1] for i, w in enumerate(words) if w == "--extra-arg"] == ["two words", "--x"]
    assert words[words.index("--executable") + 1] == "apptainer exec img.sif basf2"
    assert "--force" in words and "--literal-path" in words


def test_the_batch_system_attribute_leaves_a_chosen_system_to_the_settings(in_tmp: Path) -> None:
    with with_new_settings():
        assert fast_test._build_fast_task("s.py", "o.txt", None, False, True, []).batch_system == "auto"
        set_setting("batch_system", "slurm")
        assert fast_test._build_fast_task("s.py", "o.txt", None, False, False, []).batch_system == "local"
        chosen = fast_test._build_fast_task("s.py", "o.txt", None, False, True, [])
        assert "batch_system" not in vars(chosen) and get_setting("batch_system", task=chosen()) == "slurm"


def test_outputs_are_literal_paths_unless_asked_otherwise(in_tmp: Path) -> None:
    with with_new_settings():
        set_setting("result_dir", "results")
        literal = fast_test._build_fast_task("s.py", "o.txt", None, False, False, [])
        nested = fast_test._build_fast_task("s.py", "o.txt", None, False, False, [], literal_path=False)
        forced = fast_test._build_fast_task("s.py", "o.txt", None, True, False, [])
        required = fast_test._build_fast_req_task("data/input.txt")
        assert next(iter(literal().output()))["o.txt"].path == str(in_tmp / "o.txt")
        assert next(iter(nested().output()))["o.txt"].path.endswith(os.path.join("results", "o.txt"))
        assert "output" not in vars(forced)
        assert next(iter(required().output()))["data/input.txt"].path == str(in_tmp / "data" / "input.txt")
        assert issubclass(required, luigi.ExternalTask)


@pytest.mark.parametrize("executable", ["basf2 'oops", "   ", ""])
def test_an_executable_without_words_is_the_users_error(executable: str, in_tmp: Path) -> None:
    with pytest.raises(CliUserError) as raised:
        fast_test._build_fast_task("s.py", "o.txt", None, False, False, [], executable=executable)
    assert raised.value.exit_code == 2


def test_batch_systems_are_checked_with_b2luigis_text(in_tmp: Path) -> None:
    assert fast_test._resolve_batch_system("gbasf2") == "gbasf2"
    assert fast_test._resolve_batch_system("sge") == "sge"  # b2batch's own systems are accepted too
    with pytest.raises(CliUserError, match=r"^Unknown batch system 'slrum'\. Did you mean 'slurm'\? Valid choices: "
                                           r"auto, custom, gbasf2, htcondor, local, lsf, slurm, test\.$"):
        fast_test._resolve_batch_system("slrum")


def test_the_jobs_command_line_is_none_of_process_flags() -> None:
    """process() reads the command line before it hands the rest to the job: none of it may be taken."""
    argv = fast_test.job_argv("s.py", "-o.txt", "in.txt", True, ["--batch", "-y", "--remove", "X"], False,
                              "basf2 --batch")
    args, rest = flags.parse_as_b2luigi(argv, True)
    assert rest == argv and not (args.batch or args.yes or args.remove)


def test_test_task_runs_here_and_leaves_the_command_line_and_settings_as_they_were(in_tmp: Path) -> None:
    argv = list(sys.argv)
    before = [settings.get_setting(name) for name in ("process_once", "process_returns_result")]
    with with_new_settings():
        for name in ("first.txt", "second.txt"):  # b2luigi's rule of one process() per script is not test_task's
            fast_test.test_task("writes.py", name, "data/input.txt", False, False, ["--x"],
                                settings=['env={"A": "1"}'])
            assert (in_tmp / name).read_text() == "seed|--x"
        assert get_setting("env") == {"A": "1"} and get_setting("__batch_runner_use_cli")
        assert [settings.get_setting(name) for name in ("process_once", "process_returns_result")] == before
    assert sys.argv == argv
    with with_new_settings(), pytest.raises(SystemExit) as stopped:
        fast_test.test_task("silent.py", "never.txt", None, False, False, [])
    assert stopped.value.code == 1


# --- --batch: a job that reruns the command -------------------------------------------------------------------

def test_batch_runs_the_task_as_a_job_that_reruns_b2luigi_test(tmp_path: Path) -> None:
    """Under emulated HTCondor: the job runs ``b2luigi test`` again on the node, which runs only the job's task, after
    its wrapper sourced ``--env-script``."""
    folder = scripts(tmp_path / "project")
    (folder / "env.sh").write_text("export H2_FROM_ENV_SCRIPT=sourced\n")
    (folder / "job.py").write_text(textwrap.dedent("""\
        import os, pathlib, sys
        out, given = sys.argv[sys.argv.index("-o") + 1], pathlib.Path(sys.argv[sys.argv.index("-i") + 1]).read_text()
        pathlib.Path(out).parent.mkdir(parents=True, exist_ok=True)
        pathlib.Path(out).write_text("|".join([given, os.environ.get("H2_FROM_ENV_SCRIPT", ""), *sys.argv[5:]]))
        """))
    command = tmp_path / "b2luigi"  # the console script's part: a file, as a job reruns it
    command.write_text("import sys\nfrom b2luigi.cli import main\nsys.exit(main())\n")
    env = {**_without_test_base(), "NO_COLOR": "1", "B2BATCH_EMULATOR_DIR": str(tmp_path / "emulator")}
    inner = [sys.executable, str(command), "test", "-s", "job.py", "-o", "out/result.txt", "-i", "data/input.txt",
             "--batch-system", "htcondor", "--env-script", "env.sh", "--", "--lr", "0.1"]
    ran = subprocess.run([sys.executable, "-m", "b2batch", "emulate", "htcondor", "--", *inner], cwd=folder, env=env,
                         capture_output=True, text=True, timeout=180)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    # The input found on the node, the environment script sourced by the job's wrapper, the extra arguments.
    assert (folder / "out" / "result.txt").read_text() == "seed|sourced|--lr|0.1"
    [job] = (folder / "task_files").glob("**/FastTask/job.json")  # b2luigi's <parameters>/<TaskFamily>/
    spec = json.loads(job.read_text())
    assert spec["script"] == str(command) and spec["argv"][:3] == ["test", "-s", str(folder / "job.py")]
    assert (job.parent / "condor.log").exists()  # it really was a job


def test_test_task_with_jobs_from_another_program_reruns_the_command(tmp_path: Path) -> None:
    """Called from another program (here a script; b2luigi's own tests call it from pytest), test_task(batch=True)
    submits a job that runs the ``b2luigi`` command as a file of b2batch's, which rebuilds and runs the task."""
    folder = scripts(tmp_path / "project")
    (folder / "caller.py").write_text(textwrap.dedent("""\
        import b2luigi  # the shim's profile, as in b2luigi's tests
        from b2luigi.cli.runner import test_task
        test_task("writes.py", "result.txt", None, False, True, ["--lr", "0.1"], batch_system="htcondor")
        print("test_task returned")
        """))
    env = {**_without_test_base(), "NO_COLOR": "1", "B2BATCH_EMULATOR_DIR": str(tmp_path / "emulator")}
    ran = subprocess.run([sys.executable, "-m", "b2batch", "emulate", "htcondor", "--", sys.executable, "caller.py"],
                         cwd=folder, env=env, capture_output=True, text=True, timeout=180)
    assert ran.returncode == 0 and "test_task returned" in ran.stdout, ran.stdout + ran.stderr
    assert (folder / "result.txt").read_text() == "done|--lr 0.1"
    [job] = (folder / "task_files").glob("**/FastTask/job.json")
    spec = json.loads(job.read_text())
    assert spec["script"] == fast_test.COMMAND_FILE and spec["argv"][:3] == ["test", "-s", str(folder / "writes.py")]
    assert (job.parent / "condor.log").exists()  # it really was a job
