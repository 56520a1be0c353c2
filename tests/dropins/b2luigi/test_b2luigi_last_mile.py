"""``import b2luigi``, the last mile (issue 40): what a b2luigi 1.3.0 user still met under the shim, each
matched to b2luigi (or listed as a difference). Whole scripts beside the real b2luigi are in the differential
corpus (``tests/dropins/b2luigi/differential/scripts``); the tests here check each point quickly, in this process or
in one subprocess, and against the real b2luigi where its answer is the point."""

from __future__ import annotations

import os
import re
import sys
import subprocess
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest
from peers import peer_python
from conftest import peer_env, shim_env


@dataclass
class Ran:
    """One run of a script: its exit status, printed lines and the files it left, relative to its folder."""

    status: int
    stdout: list[str]
    stderr: list[str]
    files: set[str]
    folder: Path


def run_script(folder: Path, text: str, *args: str, python: str | None = None, cwd: Path | None = None,
               name: str = "flow.py", timeout: float = 60) -> Ran:
    """Write ``text`` as ``folder/name`` and run it with ``args``: under the real b2luigi when ``python`` is
    its venv's, else under b2batch through the shim. ``cwd`` is where it runs (default: ``folder``)."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / name
    script.write_text(textwrap.dedent(text))
    env = peer_env() if python else shim_env()
    done = subprocess.run([python or "python3", str(script), *args], cwd=cwd or folder, env=env, timeout=timeout,
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)
    files = {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    return Ran(done.returncode, done.stdout.splitlines(), done.stderr.splitlines(), files - {name}, folder)


def run_both(tmp_path: Path, text: str, *args: str) -> tuple[Ran, Ran]:
    """The script run under the real b2luigi 1.3.0 and under the shim, each in a fresh folder."""
    peer = run_script(tmp_path / "b2luigi", text, *args, python=str(peer_python("b2luigi")))
    return peer, run_script(tmp_path / "shim", text, *args)


def lines_with(prefix: str, lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith(prefix)]


# --- 2: clone_parent / clone_parents ---------------------------------------------------------------------

def test_inherits_gives_clone_parent_and_clone_parents_as_b2luigi_does(b2luigi) -> None:
    class Energy(b2luigi.Task):
        energy = b2luigi.IntParameter()
        seed = b2luigi.IntParameter()

    class Calibration(b2luigi.Task):
        energy = b2luigi.IntParameter()

    @b2luigi.inherits(Energy, Calibration, without="seed")
    class Merge(b2luigi.Task):
        pass

    merge = Merge(energy=3)
    assert merge.clone_parent(seed=1) == Energy(energy=3, seed=1)
    assert merge.clone_parents(seed=2) == [Energy(energy=3, seed=2), Calibration(energy=3)]
    # b2luigi's requires adds neither (only its inherits does)
    @b2luigi.requires(Calibration)
    class Plot(b2luigi.Task):
        pass

    assert not hasattr(Plot(energy=3), "clone_parent")


# --- 3: batch_system in a run without --batch -------------------------------------------------------------

BATCH_SYSTEM_IN_RUN = """
    import b2luigi


    class Plain(b2luigi.Task):
        def output(self):
            yield self.add_to_output("plain.txt")

        def run(self):
            print("plain:", b2luigi.get_setting("batch_system", default="<none>"),
                  b2luigi.get_setting("batch_system", task=self, default="<none>"))
            with open(self.get_output_file_name("plain.txt"), "w") as f:
                f.write("done")


    class Own(Plain):
        batch_system = "test"

        def requires(self):
            yield Plain()

        def output(self):
            yield self.add_to_output("own.txt")

        def run(self):
            print("own:", b2luigi.get_setting("batch_system", default="<none>"),
                  b2luigi.get_setting("batch_system", task=self, default="<none>"))
            with open(self.get_output_file_name("own.txt"), "w") as f:
                f.write("done")


    if __name__ == "__main__":
        b2luigi.process(Own(), workers=1)
        print("after:", b2luigi.get_setting("batch_system", default="<none>"))
"""


@pytest.fixture(scope="module")
def batch_system_in_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Ran, Ran]:
    return run_both(tmp_path_factory.mktemp("batch_system_in_run"), BATCH_SYSTEM_IN_RUN)


def test_batch_system_is_local_in_a_run_without_batch_and_the_tasks_own_in_its_job(batch_system_in_run) -> None:
    peer, ours = batch_system_in_run
    assert peer.status == ours.status == 0, ours.stderr
    assert lines_with("plain:", peer.stdout) == lines_with("plain:", ours.stdout) == ["plain: local local"]
    assert lines_with("after:", peer.stdout) == lines_with("after:", ours.stdout) == ["after: local"]
    logs = [(ran.folder / "logs" / "Own" / "stdout").read_text().splitlines() for ran in (peer, ours)]
    assert lines_with("own:", logs[0]) == lines_with("own:", logs[1]) == ["own: <none> test"]


# --- 8: b2luigi's messages and exceptions -----------------------------------------------------------------

def test_a_batch_task_logs_b2luigis_batch_process_line(batch_system_in_run) -> None:
    peer, ours = batch_system_in_run
    line = "INFO: Batch process TestProcess running  Own()"
    assert line in peer.stderr and line in ours.stderr, ours.stderr


DISPATCH_KILLED = """
    import os, signal
    import b2luigi


    class Crash(b2luigi.Task):
        how = b2luigi.Parameter()

        def output(self):
            yield self.add_to_output("out.txt")

        @b2luigi.dispatch
        def run(self):
            if self.how == "signal":
                os.kill(os.getpid(), signal.SIGSEGV)
            raise ValueError("bad")


    if __name__ == "__main__":
        b2luigi.process([Crash(how="signal"), Crash(how="raise")], workers=1)
"""


def test_a_dispatched_run_that_fails_is_b2luigis_runtime_error_with_its_return_code(tmp_path: Path) -> None:
    peer, ours = run_both(tmp_path, DISPATCH_KILLED)
    assert peer.status == ours.status == 0
    wanted = [f"RuntimeError: Execution failed with return code {code}" for code in (-11, 1)]
    assert lines_with("RuntimeError", peer.stderr) == lines_with("RuntimeError", ours.stderr) == wanted


PROPERTY_RAISES = """
    import b2luigi


    class MyTask(b2luigi.Task):
        @property
        def queue(self):
            return self.no_such_attribute

    for default in ({}, {"default": "short"}):
        try:
            print(b2luigi.get_setting("queue", task=MyTask(), **default))
        except Exception as error:
            print(type(error).__name__, error)
"""


def test_an_attribute_error_of_a_task_property_reaches_the_caller_of_get_setting(tmp_path: Path) -> None:
    peer, ours = run_both(tmp_path, PROPERTY_RAISES)
    wanted = ["AttributeError 'MyTask' object has no attribute 'no_such_attribute'"] * 2
    assert peer.stdout == ours.stdout == wanted, ours.stderr


# --- 1: the b2luigi command after the documented install ----------------------------------------------------

ROOT = Path(__file__).resolve().parents[3]
SUBCOMMANDS = ("about", "init", "version", "self-update", "run", "show", "remove", "cleanup", "test", "tasks",
               "graph")


@pytest.fixture(scope="session")
def installed_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with b2batch from this checkout (editable, as a developer installs it) and the shim
    installed as docs/migrating.md says: nothing else added by hand (one per test session: about 15 s)."""
    venv = tmp_path_factory.mktemp("shim-venv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    done = subprocess.run([*pip, "-e", str(ROOT), str(ROOT / "compat" / "b2luigi-shim")], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return venv


@pytest.mark.slow
def test_the_b2luigi_command_works_after_pip_install_of_the_shim(installed_venv: Path, tmp_path: Path) -> None:
    command = str(installed_venv / "bin" / "b2luigi")
    env = peer_env(NO_COLOR="1", COLUMNS="200")

    def b2luigi(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([command, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)

    listed = b2luigi("--help")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    for name in SUBCOMMANDS:
        assert re.search(rf"│ {re.escape(name)}\s", listed.stdout), (name, listed.stdout)
        helped = b2luigi(name, "--help")
        assert helped.returncode == 0 and "Usage:" in helped.stdout, (name, helped.stdout + helped.stderr)
    (tmp_path / "tasks.py").write_text(textwrap.dedent("""
        import b2luigi


        class Hello(b2luigi.Task):
            who = b2luigi.Parameter()

            def output(self):
                yield self.add_to_output("hello.txt")

            def run(self):
                with open(self.get_output_file_name("hello.txt"), "w") as f:
                    f.write(f"hello {self.who}")
    """))
    (tmp_path / "parameters.py").write_text("config = {'who': 'world'}\n")
    ran = b2luigi("run", "Hello")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert (tmp_path / "who=world" / "hello.txt").read_text() == "hello world"


# --- 4: where settings files are found ---------------------------------------------------------------------

FROM_ELSEWHERE = """
    import b2luigi


    class Out(b2luigi.Task):
        def output(self):
            yield self.add_to_output("out.txt")

        def run(self):
            with open(self.get_output_file_name("out.txt"), "w") as f:
                f.write("done")


    if __name__ == "__main__":
        print("my_key:", b2luigi.get_setting("my_key", default="<none>"))
        b2luigi.process(Out())
"""


def _run_from_elsewhere(base: Path, python: str | None) -> tuple[Ran, list[str]]:
    """The script in ``base/proj/sub`` (a settings.json in ``proj``) run from ``base/elsewhere``: the run and
    every file below ``base`` afterwards."""
    (base / "proj").mkdir(parents=True)
    (base / "proj" / "settings.json").write_text('{"result_dir": "from_settings", "my_key": "proj"}')
    (base / "elsewhere").mkdir()
    ran = run_script(base / "proj" / "sub", FROM_ELSEWHERE, python=python, cwd=base / "elsewhere")
    return ran, sorted(str(p.relative_to(base)) for p in base.rglob("*") if p.is_file()
                       and "__pycache__" not in p.parts and p.name != "flow.py")


def test_settings_files_are_searched_from_the_working_directory_only_as_b2luigi_does(tmp_path: Path) -> None:
    peer, peer_files = _run_from_elsewhere(tmp_path / "b2luigi", str(peer_python("b2luigi")))
    ours, our_files = _run_from_elsewhere(tmp_path / "shim", None)
    assert peer.status == ours.status == 0, ours.stderr
    assert lines_with("my_key:", peer.stdout) == lines_with("my_key:", ours.stdout) == ["my_key: <none>"]
    assert our_files == peer_files == ["proj/settings.json", "proj/sub/out.txt"]


def test_b2batchs_own_profile_still_reads_the_settings_beside_the_script(tmp_path: Path) -> None:
    base = tmp_path
    (base / "proj").mkdir()
    (base / "proj" / "settings.json").write_text('{"result_dir": "from_settings", "my_key": "proj"}')
    (base / "elsewhere").mkdir()
    ran = run_script(base / "proj" / "sub", FROM_ELSEWHERE.replace("import b2luigi", "import b2batch as b2luigi"),
                     cwd=base / "elsewhere")
    assert ran.status == 0, ran.stderr
    assert "my_key: proj" in ran.stdout


# --- 6: a task's own get_log_file_dir() --------------------------------------------------------------------

CORPUS = ROOT / "tests" / "dropins" / "b2luigi" / "differential" / "scripts"


def test_a_tasks_own_log_file_dir_holds_its_jobs_and_its_dispatched_runs_logs(tmp_path: Path) -> None:
    peer, ours = run_both(tmp_path, (CORPUS / "log_file_dir_method.py").read_text())
    assert peer.status == ours.status == 0, ours.stderr
    logs = {f for f in peer.files if f.startswith("logs/")}
    assert logs == {f for f in ours.files if f.startswith("logs/")} == {
        f"logs/own/{task}/{stream}" for task in ("job_1", "dispatched") for stream in ("stdout", "stderr")}
    assert "job says hello 1" in (ours.folder / "logs/own/job_1/stdout").read_text()
    assert "dispatched says hello" in (ours.folder / "logs/own/dispatched/stdout").read_text()


# --- 5: --batch on batch_system local runs `workers` tasks at once -------------------------------------------

LOCAL_WORKERS = """
    import os
    import time

    import b2luigi


    class Sleep(b2luigi.Task):
        n = b2luigi.IntParameter()

        def output(self):
            yield self.add_to_output("pid.txt")

        def run(self):
            time.sleep(1)
            with open(self.get_output_file_name("pid.txt"), "w") as f:
                f.write(str(os.getpid()))


    class Count(b2luigi.Task):
        def requires(self):
            for n in range(6):
                yield Sleep(n=n)

        def output(self):
            yield self.add_to_output("count.txt")

        def run(self):
            pids = {open(name).read() for name in self.get_input_file_names("pid.txt")}
            with open(self.get_output_file_name("count.txt"), "w") as f:
                f.write(f"{len(pids)} processes")


    if __name__ == "__main__":
        b2luigi.set_setting("batch_system", "local")
        start = time.monotonic()
        b2luigi.process(Count(), workers=3, batch=True)
        print(f"wall {time.monotonic() - start:.2f}")
"""


def test_batch_on_local_runs_workers_tasks_at_once_in_child_processes(tmp_path: Path) -> None:
    peer, ours = run_both(tmp_path, LOCAL_WORKERS)
    assert peer.status == ours.status == 0, ours.stderr
    counts = [(ran.folder / "count.txt").read_text() for ran in (peer, ours)]
    assert counts[0] == counts[1] == "6 processes"  # each task in a process of its own
    walls = [float(lines_with("wall", ran.stdout)[0].split()[1]) for ran in (peer, ours)]
    assert walls[1] < 4.0, walls  # one task at a time: 6 s; three at a time: 2 s and the start of processes



# --- 9: a folder named b2batch beside the script ------------------------------------------------------------

@pytest.mark.slow
def test_a_folder_named_b2batch_beside_the_script_does_not_hide_b2batch(installed_venv: Path,
                                                                          tmp_path: Path) -> None:
    """Python's path finder made the folder an empty namespace package ahead of the editable install's finder:
    ``import b2luigi`` failed with "cannot import name '__all__' from 'b2batch' (unknown location)"."""
    (tmp_path / "b2batch").mkdir()
    (tmp_path / "b2batch" / "notes.txt").write_text("a user's folder that happens to have this name")
    ran = run_script(tmp_path, PLAIN_RUN, python=str(installed_venv / "bin" / "python"))
    assert ran.status == 0, "\n".join(ran.stderr[-20:])
    assert (tmp_path / "out.txt").read_text() == "done"


PLAIN_RUN = """
    import b2luigi


    class Out(b2luigi.Task):
        def output(self):
            yield self.add_to_output("out.txt")

        def run(self):
            with open(self.get_output_file_name("out.txt"), "w") as f:
                f.write("done")


    if __name__ == "__main__":
        b2luigi.process(Out())
"""
