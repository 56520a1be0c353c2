"""b2luigi's API beyond the basics, run as b2luigi documents it: scripts that ``import b2luigi`` (the shim of
``compat/b2luigi-shim`` on PYTHONPATH, as ``pip install ./compat/b2luigi-shim`` would put it) run unchanged."""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import signal
import stat
import subprocess
import sys
import warnings
from pathlib import Path

import luigi.task
import pytest
from conftest import TAB, clean_env, shim_env, tree

import b2batch
from b2batch import settings
from b2batch.luigi_frontend.dispatching import DispatchError

ROOT = Path(__file__).resolve().parents[3]
SHIM = ROOT / "compat" / "b2luigi-shim"
# --- the shim -------------------------------------------------------------------------------------------------

def test_the_shim_gives_b2batch_under_b2luigis_module_paths(b2luigi) -> None:
    from b2luigi.batch.processes import BatchProcess, JobStatus
    from b2luigi.core import executable, utils
    from b2luigi.core.settings import DeprecatedSettingsWarning, get_setting

    assert b2luigi.Task is b2batch.Task and b2luigi.process is b2batch.process
    assert (BatchProcess, JobStatus) == (b2batch.BatchProcess, b2batch.JobStatus)
    assert b2luigi.core.utils is utils and callable(executable.create_executable_wrapper)
    assert issubclass(DeprecatedSettingsWarning, DeprecationWarning) and callable(get_setting)
    assert b2luigi.copies is b2batch.copies and b2luigi.dispatch is b2batch.dispatch


def test_b2batch_itself_never_imports_the_compat_package() -> None:
    for module in (ROOT / "b2batch").rglob("*.py"):
        if "compat" in module.parts:
            continue
        tree = ast.parse(module.read_text())
        names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        assert not [n for n in names if "compat" in n.split(".")], module


# --- dispatch -------------------------------------------------------------------------------------------------

def test_a_dispatched_segfault_fails_only_its_task_naming_the_signal(workflow) -> None:
    flow = workflow("b2luigi_dispatch.py")
    run = flow.run(env=shim_env())
    assert run.returncode == 0, run.stderr  # b2luigi's: process() returns when a task failed
    assert "RuntimeError: Execution failed with return code -11" in run.stderr  # b2luigi's type and text
    steering = int(run.stdout.split("steering pid ")[1].split()[0])
    worked = int((flow.folder / "pid.txt").read_text())
    assert worked != steering  # DispatchableTask.process() ran in a child process
    crash_logs = flow.folder / "logs" / "how=segfault" / "Crash"
    assert "about to crash" in (crash_logs / "stdout").read_text()
    assert "hello from the dispatched process" in (flow.folder / "logs" / "Works" / "stdout").read_text()
    assert "hello from the dispatched process" not in run.stdout  # the child's output went to the log
    assert not (flow.folder / "how=segfault").exists()


@pytest.mark.slow
@pytest.mark.parametrize(("system", "many"), [
    ("local", {}),
    pytest.param("slurm", {}, marks=pytest.mark.slurm),
    pytest.param("slurm", {"pilot_jobs": 1, "pilot_idle_timeout": 5}, marks=pytest.mark.slurm),
    pytest.param("sge", {"tasks_per_job": 2}, marks=pytest.mark.sge),
], ids=["local-jobs", "slurm-jobs", "slurm-pilots", "sge-bundles"])
def test_a_dispatched_segfault_in_a_batch_job_fails_only_its_task(request, workflow, system: str,
                                                                   many: dict) -> None:
    if system != "local":
        request.getfixturevalue(system)  # the cluster must be up
    flow = workflow("b2luigi_dispatch.py")
    jobs_on = "test" if system == "local" else system  # b2luigi's local: in luigi's worker; test: local jobs
    (flow.folder / "settings.json").write_text(json.dumps({"batch_system": jobs_on, "exit_on_failure": True,
                                                            "run_summary": True, **many}))
    run = flow.run("--batch", env=shim_env(), timeout=300)
    assert run.returncode == 1, run.stderr[-3000:]
    crash_logs = flow.folder / "logs" / "how=segfault" / "Crash"
    assert "RuntimeError: Execution failed with return code -11" in run.stderr  # b2luigi's, in the job's stderr
    assert "about to crash" in (crash_logs / "stdout").read_text()  # the job's log has the child's output
    assert "hello from the dispatched process" in (flow.folder / "logs" / "Works" / "stdout").read_text()
    pid = int((flow.folder / "pid.txt").read_text())
    assert pid != int(run.stdout.split("steering pid ")[1].split()[0])
    assert not (flow.folder / "how=segfault").exists()
    assert "Works" in run.stderr and re.search(r"Works\s+\S+\s+1\s+0\s+0", run.stderr)  # done in its job


def test_dispatch_runs_in_place_in_test_mode(workflow) -> None:
    flow = workflow("b2luigi_dispatch.py")
    (flow.folder / "settings.json").write_text("{}")
    run = subprocess.run([sys.executable, "-c", "import b2luigi_dispatch as w, b2luigi, os; "
                          "b2luigi.set_setting('_dispatch_local_execution', True); w.Works().run(); "
                          "print(open('pid.txt').read() == str(os.getpid()))"],
                         cwd=flow.folder, env=shim_env(), capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["hello from the dispatched process", "True"]


@pytest.mark.parametrize(("how", "message"), [
    ("raise", "raised an exception"), ("exit", "exited with status 7"), ("kill", "signal 9 (SIGKILL)"),
])
def test_dispatch_errors_say_how_the_child_ended(tmp_path: Path, how: str, message: str) -> None:
    class Fragile(b2batch.Task):
        def output(self):
            yield self.add_to_output("out")

        @b2batch.dispatch
        def run(self):
            print("to the log", file=sys.stderr, flush=True)
            if how == "raise":
                raise ValueError("bad input")
            if how == "exit":
                os._exit(7)
            os.kill(os.getpid(), signal.SIGKILL)

    with pytest.raises(DispatchError, match=re.escape(message)) as error:
        Fragile().run()
    assert "to the log" in str(error.value)  # the end of the child's stderr
    assert (tmp_path / "logs" / "Fragile" / "stderr").is_file()


# --- parameters -----------------------------------------------------------------------------------------------

def test_hash_function_makes_the_path_text_of_a_hashed_parameter(b2luigi) -> None:
    class Sim(b2luigi.Task):
        files = b2luigi.ListParameter(hashed=True, hash_function=lambda files: f"{len(files)}files")
        tag = b2luigi.Parameter(hashed=True)
        plain = b2luigi.Parameter(hash_function=len)  # b2luigi 1.3: without hashed=True it does nothing

        def output(self):
            yield self.add_to_output("sim.txt")

    path = Path(Sim(files=["a", "b"], tag="x/y", plain="abc").get_output_file_name("sim.txt"))
    assert path.parent.name == "plain=abc"
    assert path.parent.parent.parent.name == "files=2files"
    assert path.parent.parent.name == "tag=hashed_" + hashlib.md5(b"x/y").hexdigest()  # md5 of str(value)
    assert Sim.files.serialize_hashed(("a",)) == "1files"
    assert Sim.tag.serialize_hashed(("a", "b")) == "hashed_" + hashlib.md5(str(("a", "b")).encode()).hexdigest()
    with pytest.raises(TypeError, match="one argument"):
        b2luigi.Parameter(hash_function=lambda a, b: a)


def test_parameter_generators_expand_to_every_combination(b2luigi) -> None:
    config = {"energy": b2luigi.ParameterGenerator([1, 2]),
              "pair": b2luigi.ZippedParameterGenerator(exp=[7, 8], run=["a", "b"]), "tag": "v1"}
    assert b2luigi.expand_parameters(config) == [
        {"tag": "v1", "energy": 1, "exp": 7, "run": "a"}, {"tag": "v1", "energy": 1, "exp": 8, "run": "b"},
        {"tag": "v1", "energy": 2, "exp": 7, "run": "a"}, {"tag": "v1", "energy": 2, "exp": 8, "run": "b"}]
    assert b2luigi.expand_parameters(b2luigi.ZippedParameterGenerator(a=[1, 2])) == [{"a": 1}, {"a": 2}]
    with pytest.raises(ValueError, match="all lists must have the same length"):
        b2luigi.ZippedParameterGenerator(a=[1], b=[1, 2])
    with pytest.raises(ValueError):
        b2luigi.ParameterGenerator([])


def test_copies_is_luigis(b2luigi) -> None:
    class Source(b2luigi.Task):
        n = b2luigi.IntParameter()

        def output(self):
            yield self.add_to_output("n.txt")

    @b2luigi.copies(Source)
    class Copy(b2luigi.Task):
        def output(self):
            return b2luigi.LocalTarget(f"copy{self.n}.txt")

    assert [type(t).__name__ for t in luigi.task.flatten(Copy(n=3).requires())] == ["Source"]


# --- core.utils and core.settings -------------------------------------------------------------------------

def test_core_utils_behave_as_b2luigi_documents(b2luigi, tmp_path: Path) -> None:
    from b2luigi.core import utils

    assert list(utils.product_dict(a=[1, 2], b=[3, 4])) == [
        {"a": 1, "b": 3}, {"a": 1, "b": 4}, {"a": 2, "b": 3}, {"a": 2, "b": 4}]
    assert utils.fill_kwargs_with_lists(a=[1, 2], b=3, c="x", d=None) == {"a": [1, 2], "b": [3], "c": ["x"],
                                                                         "d": []}
    assert utils.flatten_to_dict([{"a": 1, "b": 2}, {"c": 3}, "d"]) == {"a": 1, "b": 2, "c": 3, "d": "d"}

    class Part(b2luigi.Task):
        n = b2luigi.IntParameter()
        note = b2luigi.Parameter(default="x", significant=False)

        def output(self):
            yield self.add_to_output("part.txt")

    class Whole(b2luigi.WrapperTask):
        def requires(self):
            return [Part(n=1), Part(n=2), Part(n=1)]

    part = Part(n=1)
    assert utils.flatten_to_file_paths([{"part.txt": part.output().__next__()["part.txt"]}]) == {
        "part.txt": [f"{tmp_path}/./n=1/part.txt"]}  # joined as b2luigi joins result_dir "."
    assert [str(t) for t in utils.task_iterator(Whole())] == ["Whole()", "Part(n=1)", "Part(n=2)"]
    assert utils.get_filled_params(part) == {"n": 1, "note": "x"}
    assert utils.get_serialized_parameters(part) == {"n": "1"}
    assert utils.create_output_file_name(part, "a.txt") == f"{tmp_path}/./n=1/a.txt"
    assert utils.create_output_file_name(part, "a.txt", result_dir="/else") == "/else/n=1/a.txt"
    assert utils.get_log_file_dir(part) == str(tmp_path / "logs" / "n=1" / "Part") + os.sep
    assert utils.get_task_file_dir(part) == str(tmp_path / "task_files" / "n=1" / "Part") + os.sep  # b2luigi's place
    assert utils.map_folder("data") == str(tmp_path / "data") and utils.map_folder("/abs") == "/abs"


def test_renamed_settings_are_read_with_a_deprecation_warning(b2luigi, tmp_path: Path) -> None:
    from b2luigi.core.settings import DeprecatedSettingsWarning, get_setting

    (tmp_path / "settings.json").write_text('{"result_path": "old_results"}')
    with pytest.warns(DeprecatedSettingsWarning, match="result_path is deprecated. Please use result_dir"):
        assert b2luigi.get_setting("result_dir") == "old_results"
    class Old:
        my_old = 5

    with pytest.warns(DeprecatedSettingsWarning, match="my_old is deprecated. Please use my_new"):
        assert get_setting("my_new", task=Old(), deprecated_keys=["my_old"]) == 5
    assert get_setting("unset", default=3) == 3
    with pytest.raises(ValueError):
        get_setting("unset")
    b2luigi.set_setting("result_dir", "new")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert get_setting("result_dir") == "new"
    assert "result_path" in settings.RENAMED_SETTINGS


def test_create_executable_wrapper_writes_a_runnable_wrapper(workflow) -> None:
    """b2luigi's wrapper, run as a user's own batch process would run it: it runs that one task (through
    ``--batch-runner --task-id``) and nothing else of the graph."""
    flow = workflow("b2luigi_batch_worker.py")
    done = flow.run("wrapper", "part1", env=shim_env())
    assert done.returncode == 0 and "wrapper exit status 0" in done.stdout, done.stderr
    assert tree(flow.folder / "results") == ["n=1/part.txt"]
    wrapper = next(flow.folder.rglob("executable_wrapper.sh"))
    assert wrapper.stat().st_mode & stat.S_IXUSR
    lines = wrapper.read_text().splitlines()
    assert lines[:3] == ["#!/bin/bash", "set -e", f"cd {flow.folder}"]
    assert lines[-1].endswith(" b2luigi_batch_worker.py --batch-runner --task-id Part_1_f4fe3360f0")


# --- a b2luigi script, end to end ---------------------------------------------------------------------------

def test_a_b2luigi_script_dry_runs_runs_and_fails_as_b2luigi_documents(workflow) -> None:
    flow = workflow("b2luigi_compat.py")
    dry = flow.run("--dry-run", env=shim_env())
    assert dry.returncode == 0, dry.stderr  # b2luigi 1.3.0's status, also when a task would run
    results = f"{flow.folder}/."  # b2luigi's result_dir ".", joined as b2luigi joins it
    assert (f"Simulate\n{TAB}Would run Simulate(energy=1, files=[\"a.root\", \"b.root\"])\n{TAB}call: dry_run()\n"
            f"would write {results}/energy=1/files=2files/sim.txt\n") in dry.stdout
    assert dry.stdout.rstrip().endswith("In total 3")

    failed = flow.run("--fail", env=shim_env())
    assert failed.returncode == 0, failed.stderr  # b2luigi's exit status after a failure
    assert "simulation broke half way" in failed.stderr
    assert not list(flow.folder.rglob("sim*.txt"))  # on_temporary_files left no half-written output

    done = flow.run(env=shim_env())
    assert done.returncode == 0, done.stderr
    assert (flow.folder / "energy=2" / "files=2files" / "sim.txt").read_text() == "{'energy': '2', 'files': '2files'}"
    finished = flow.run("--dry-run", env=shim_env())
    assert finished.returncode == 0 and finished.stdout.strip() == "All tasks are finished!"


def test_the_error_of_a_dispatched_child_quotes_the_end_of_a_long_stderr(tmp_path: Path) -> None:
    from b2batch.luigi_frontend import dispatching

    stdout, stderr = tmp_path / "stdout", tmp_path / "stderr"
    stderr.write_text("".join(f"noise {i}\n" for i in range(200_000)) + "Traceback ...\nRuntimeError: the cause\n")
    where = dispatching._where((stdout, stderr))
    assert where.endswith("noise 199999\nTraceback ...\nRuntimeError: the cause")
    assert where.count("\n") == 10 and "noise 199992" in where and "noise 199991" not in where
    assert dispatching._where((stdout, tmp_path / "missing")) == f"; its output is in {stdout} and {tmp_path / 'missing'}."
