"""b2luigi 1.3's public names, module paths and behaviours, run as b2luigi documents them: scripts that
``import b2luigi`` (through the shim of ``compat/b2luigi-shim``) run unchanged.

The names below were collected from b2luigi 1.3's documentation (https://b2luigi.belle2.org/v1.3.0/api.html:
top-level function, utilities, task classes, target, remote targets, parameters, settings, temporary file
context manager, batch processes, worker scheduler factory) and its package's ``__init__``.
"""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

import luigi
import pytest
from conftest import clean_env
from conftest import shim_env

import b2batch
from b2batch.errors import SettingError

ROOT = Path(__file__).resolve().parents[3]

#: b2luigi 1.3's own top-level names (luigi's, which ``from luigi import *`` adds, are checked in test_api.py).
B2LUIGI_NAMES = [
    "BatchIntParameter", "BoolParameter", "DispatchableTask", "ExternalTask", "LocalTarget",
    "ParameterGenerator", "RemoteTarget", "Task", "WebDAVSystem", "WebDAVTarget", "WrapperTask", "XRootDSystem",
    "XRootDTarget", "ZippedParameterGenerator", "__version__", "clear_setting", "copies", "dispatch",
    "get_setting", "inherits", "on_temporary_files", "process", "requires", "set_setting", "wrap_parameter",
]

#: b2luigi 1.3's module paths with their public names.
B2LUIGI_MODULES = {
    "core.utils": ["product_dict", "fill_kwargs_with_lists", "flatten_to_dict", "flatten_to_dict_of_lists",
                   "flatten_to_file_paths", "task_iterator", "get_filled_params", "get_serialized_parameters",
                   "create_output_file_name", "get_log_file_dir", "get_task_file_dir", "map_folder"],
    "core.settings": ["get_setting", "set_setting", "clear_setting", "DeprecatedSettingsWarning"],
    "core.executable": ["create_executable_wrapper"],
    "core.dispatchable_task": ["dispatch", "DispatchableTask"],
    "core.task": ["Task", "ExternalTask", "WrapperTask"],
    "core.target": ["FileSystemTarget", "LocalTarget"],
    "core.parameter": ["wrap_parameter", "BoolParameter", "BatchIntParameter"],
    "core.temporary_wrapper": ["on_temporary_files", "TemporaryFileContextManager"],
    "core.remote_target": ["RemoteFileSystem", "RemoteTarget"],
    "core.remote_target.xrootd": ["XRootDSystem", "XRootDTarget"],
    "core.remote_target.webdav": ["WebDAVSystem", "WebDAVTarget"],
    "batch.processes": ["BatchProcess", "JobStatus"],
    "batch.processes.lsf": ["LSFProcess"],
    "batch.processes.htcondor": ["HTCondorProcess"],
    "batch.processes.slurm": ["SlurmProcess"],
    "batch.processes.gbasf2": ["Gbasf2Process"],
    "batch.processes.test": ["TestProcess"],
    "batch.workers": ["BatchSystems"],
    "batch.cache": ["BatchJobStatusCache"],
    "cli.process": ["process"],
    "contrib.gbasf2": ["Gbasf2Process"],
}

SUBCOMMANDS = ["emulate", "settings", "run", "status", "cancel", "show", "tasks", "graph", "remove", "cleanup",
               "farm"]


# --- every name --------------------------------------------------------------------------------------------

def test_every_b2luigi_name_resolves_through_the_shim(b2luigi) -> None:
    missing = [name for name in B2LUIGI_NAMES if getattr(b2luigi, name, None) is None]
    assert not missing, f"b2luigi names b2batch lacks: {missing}"
    assert not set(B2LUIGI_NAMES) - {"__version__"} - set(b2batch.__all__)  # b2batch itself has them
    for path, names in B2LUIGI_MODULES.items():
        module = importlib.import_module(f"b2luigi.{path}")
        assert module is sys.modules[f"b2luigi.{path}"]
        lacking = [n for n in names if getattr(module, n, None) is None]
        assert not lacking, f"b2luigi.{path} lacks {lacking}"


def test_the_module_paths_give_b2batchs_own_objects(b2luigi) -> None:
    from b2luigi.batch.processes.htcondor import HTCondorProcess
    from b2luigi.batch.processes.lsf import LSFProcess
    from b2luigi.batch.processes.slurm import SlurmProcess
    from b2luigi.batch.processes.test import TestProcess
    from b2luigi.batch.workers import BatchSystems
    from b2luigi.core import parameter, remote_target, target, task, temporary_wrapper
    from b2luigi.core.remote_target.webdav import WebDAVTarget
    from b2luigi.core.remote_target.xrootd import XRootDSystem

    assert (task.Task, task.WrapperTask, target.LocalTarget) == (b2batch.Task, b2batch.WrapperTask,
                                                                 b2batch.LocalTarget)
    assert parameter.BatchIntParameter is b2batch.BatchIntParameter is b2luigi.BatchIntParameter
    assert temporary_wrapper.on_temporary_files is b2batch.on_temporary_files
    assert remote_target.RemoteTarget is b2batch.RemoteTarget
    assert (XRootDSystem, WebDAVTarget) == (b2batch.XRootDSystem, b2batch.WebDAVTarget)
    assert [LSFProcess.name, HTCondorProcess.name, SlurmProcess.name, TestProcess.name] == [
        "lsf", "htcondor", "slurm", "test"]
    assert [s.value for s in BatchSystems] == ["auto", "lsf", "htcondor", "slurm", "gbasf2", "local", "test",
                                               "custom"]
    assert {s.value for s in b2luigi.JobStatus} == {"idle", "running", "successful", "aborted"}


# --- parameters -------------------------------------------------------------------------------------------

def test_batch_int_parameter_is_an_int_parameter_that_luigi_does_not_enumerate(b2luigi) -> None:
    class Grouped(b2luigi.Task):
        n = b2luigi.BatchIntParameter(default=0, grouping=True)
        m = b2luigi.IntParameter(default=0)

    param = dict(Grouped.get_params())["n"]
    assert isinstance(param, luigi.IntParameter) and param.parse("7") == 7
    assert param.next_in_enumeration(3) is None  # b2luigi: no range batching by luigi
    assert dict(Grouped.get_params())["m"].next_in_enumeration(3) == 4  # luigi's IntParameter does
    assert Grouped(n=3).n == 3


def test_wrap_parameter_can_be_called_and_parameters_take_hashed(b2luigi) -> None:
    assert b2luigi.wrap_parameter() is None
    assert b2luigi.Parameter(hashed=True).hashed and b2luigi.IntParameter(hashed=True).hashed


# --- on_temporary_files -------------------------------------------------------------------------------------

def test_on_temporary_files_takes_b2luigi_1_3s_options(b2luigi, tmp_path: Path) -> None:
    from b2luigi.core.temporary_wrapper import TemporaryFileContextManager

    class Direct(b2luigi.Task):
        def output(self):
            yield self.add_to_output("direct.txt")

        @b2luigi.on_temporary_files(outputs=False)
        def run(self):
            path = self.get_output_file_name("direct.txt")
            Path(path).write_text("x")
            assert path == f"{tmp_path}/./direct.txt"  # in place, not a temporary path (b2luigi's result_dir ".")
            raise RuntimeError("after writing")

    with pytest.raises(RuntimeError):
        Direct().run()
    assert (tmp_path / "direct.txt").read_text() == "x"  # outputs=False: nothing is undone

    class Managed(b2luigi.Task):
        def output(self):
            yield self.add_to_output("managed.txt")

    task = Managed()
    final = tmp_path / "managed.txt"
    with pytest.raises(ValueError):
        with TemporaryFileContextManager(task):
            temporary = task.get_output_file_name("managed.txt")
            Path(temporary).write_text("half")
            raise ValueError
    assert temporary != str(final) and not final.exists() and not Path(temporary).exists()
    assert re.fullmatch(r"managed-luigi-tmp-\d{10}\.txt", Path(temporary).name)  # b2luigi's temporary name
    with TemporaryFileContextManager(task):
        Path(task.get_output_file_name("managed.txt")).write_text("whole")
    assert final.read_text() == "whole"


def test_a_run_raising_inside_on_temporary_files(workflow) -> None:
    flow = workflow("b2luigi_api.py")
    env = shim_env() | {"B2LUIGI_API_FAIL": "1"}
    as_b2luigi = flow.run(env=env)
    results = flow.folder  # b2luigi's result_dir: the script's folder
    assert "part 1 broke half way" in as_b2luigi.stderr
    assert as_b2luigi.returncode == 0, as_b2luigi.stderr  # b2luigi's: process() returns, the script ends with 0
    assert "b2batch summary" not in as_b2luigi.stderr  # the b2luigi profile: luigi's summary only
    assert not (results / "n=1" / "part.txt").exists() and not list(results.rglob("*-luigi-tmp-*"))  # nothing partial
    assert (results / "n=0" / "part.txt").is_file() and not (results / "total.txt").exists()

    (flow.folder / "settings.json").write_text(json.dumps({"exit_on_failure": True, "run_summary": True}))
    failed = flow.run(env=env)
    assert failed.returncode == 1, failed.stderr  # b2batch's: a failed task makes the exit status 1
    assert "exit status 1." in failed.stderr
    assert not (results / "n=1" / "part.txt").exists()


# --- batch systems ------------------------------------------------------------------------------------------

def test_batch_system_test_runs_each_task_in_a_process_of_its_own(workflow) -> None:
    flow = workflow("b2luigi_api.py")
    (flow.folder / "settings.json").write_text(json.dumps({"run_summary": True}))  # b2batch's report, asked for
    run = flow.run("--batch", env=shim_env(), timeout=180)
    assert run.returncode == 0, run.stderr[-3000:]
    steering = run.stdout.split("steering pid ")[1].split()[0]
    parts = [(flow.folder / f"n={n}" / "part.txt").read_text() for n in range(3)]
    assert [p.split()[0] for p in parts] == ["0", "1", "2"]
    assert all(f"pid={steering}" not in p for p in parts)  # each ran as its own process, not the steering one
    assert (flow.folder / "total.txt").read_text() == "".join(parts)
    for n in range(3):  # b2luigi's TestProcess: the task's output in its log files
        assert (flow.folder / "logs" / f"n={n}" / "Part" / "stderr").is_file()
    report = json.loads(next((flow.folder / "logs").glob("b2batch-run-*.report.json")).read_text())
    assert {job["system"] for job in report["jobs"]} == {"test"}


def test_gbasf2_gives_one_clear_error(workflow) -> None:
    flow = workflow("b2luigi_api.py")
    run = flow.run("--batch", env=shim_env() | {"B2LUIGI_API_GRID": "1"})
    assert run.returncode == 1
    errors = [line for line in run.stderr.splitlines() if "'gbasf2'" in line]
    assert len(errors) == 1, run.stderr
    error = errors[0]
    assert error.startswith("ERROR: batch_system 'gbasf2' of task Part(n=")  # the task
    assert "is not available" in error and "grid" in error  # why
    assert "The setting 'batch_system' is 'gbasf2'" in error  # the setting and the value
    assert "to fix it, run the task with a batch system b2batch has" in error  # the fix
    assert "Traceback" not in run.stderr and not list(flow.folder.glob("n=*"))


def test_gbasf2_names_and_classes_raise_the_same_error(b2luigi) -> None:
    from b2luigi.batch.processes.gbasf2 import Gbasf2Process
    from b2luigi.contrib.gbasf2 import Gbasf2Process as contrib_process

    from b2batch.systems import known_systems, system_class

    assert contrib_process is Gbasf2Process and "gbasf2" not in known_systems()
    with pytest.raises(SettingError, match="'gbasf2' of task T is not available"):
        system_class("gbasf2", "T")
    with pytest.raises(SettingError, match="'gbasf2' is not available"):
        Gbasf2Process()


def test_batch_job_status_cache_asks_for_all_jobs_then_for_one(b2luigi) -> None:
    from b2luigi.batch.cache import BatchJobStatusCache

    class Cache(BatchJobStatusCache):
        asked: list = []

        def _ask_for_job_status(self, job_id=None):
            self.asked.append(job_id)
            if job_id is None:
                self["1"] = "running"
            elif job_id == "2":
                self["2"] = "done"

    cache = Cache()
    assert cache["1"] == "running" and cache.asked == [None]
    assert cache["1"] == "running" and cache.asked == [None]  # cached
    assert cache["2"] == "done" and cache.asked == [None, None, "2"]
    with pytest.raises(KeyError):
        cache["3"]
    cache.ttl = 0
    assert "1" not in cache  # expired


def test_process_takes_b2luigis_keyword_arguments(workflow) -> None:
    flow = workflow("b2luigi_api.py")
    code = ("import b2luigi_api as w, b2luigi; w.Part.batch_system = 'local'; "  # its own attribute wins, as in b2luigi
            "b2luigi.process(w.Part(n=5), auto_confirm=True, keep_tasks=None, batch_runner=False, "
            "progress_tui=False); print('returned')")
    done = subprocess.run([sys.executable, "-c", code], cwd=flow.folder, env=shim_env(), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("returned") and (flow.folder / "n=5" / "part.txt").is_file()


# --- --help -------------------------------------------------------------------------------------------------

def _created(folder: Path, before: set[Path]) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p not in before)


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_every_subcommand_answers_help_and_runs_nothing(workflow, command: str) -> None:
    flow = workflow("b2luigi_api.py")
    before = set(flow.folder.rglob("*"))
    done = subprocess.run([sys.executable, "-m", "b2batch", command, "--help"], cwd=flow.folder,
                          env=clean_env(PYTHONPATH=str(ROOT)), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: b2batch {command}"), done.stdout
    assert "steering pid" not in done.stdout  # the workflow was not loaded
    assert not _created(flow.folder, before)


def test_a_workflow_script_answers_help_and_runs_nothing(workflow) -> None:
    flow = workflow("b2luigi_api.py")
    before = set(flow.folder.rglob("*"))
    for args in (["--help"], ["--batch", "--help"], ["-h"]):
        done = flow.run(*args, env=shim_env())
        assert done.returncode == 0, done.stderr
        assert "usage: b2luigi_api.py" in done.stdout and "--batch" in done.stdout and "--dry-run" in done.stdout
        assert not _created(flow.folder, before), args  # no results, logs or job files: nothing ran


# --- --remove TASK ... ----------------------------------------------------------------------------------------

def _outputs(folder: Path) -> dict[str, int]:
    names = [p.name for p in (folder / "results").rglob("*.txt")]
    return {name: names.count(name) for name in sorted(set(names))}


def test_remove_names_task_classes_and_keep_spares_them(workflow) -> None:
    """b2luigi 1.3: ``--remove MyTask -y`` removes the outputs of MyTask's tasks only, not of the tasks that
    need them; ``--remove-only`` does the same and runs nothing; ``--keep`` spares classes."""
    flow = workflow("b2luigi_style.py")
    assert flow.run().returncode == 0
    everything = {"reco.txt": 1, "sim.txt": 2, "summary.txt": 1}
    assert _outputs(flow.folder) == everything

    done = flow.run("--remove-only", "Simulate", "-y")
    assert done.returncode == 0, done.stderr
    assert "Removed outputs for 2 tasks." in done.stdout and "Summary" not in done.stdout
    assert _outputs(flow.folder) == {"reco.txt": 1, "summary.txt": 1}  # removed, and nothing ran again

    done = flow.run("--remove", "Reconstruct", "Summary", "--keep", "Summary", "-y")
    assert done.returncode == 0, done.stderr
    assert "Removed outputs for 1 tasks." in done.stdout
    assert _outputs(flow.folder) == {"summary.txt": 1}  # then ran: Summary is complete, so nothing did

    done = flow.run("--remove-only", "-y")  # no names: the root task's outputs
    assert done.returncode == 0, done.stderr
    assert _outputs(flow.folder) == {}
    assert flow.run().returncode == 0 and _outputs(flow.folder) == everything

    done = flow.run("--remove-only", "Simulat", "-y")
    assert done.returncode != 0
    assert "not in the workflow's graph: Simulat. The graph has: Reconstruct, Simulate, Summary" in done.stderr
    assert _outputs(flow.folder) == everything  # a wrong name removes nothing


def test_a_scripts_own_short_flag_is_not_taken_for_yes(workflow) -> None:
    flow = workflow("flags.py")
    done = subprocess.run([sys.executable, "-c", "import b2batch.luigi_frontend.flags as c, sys; "
                           "a, rest = c.parse(['-y', '3', '--remove', 'A'], own_flags={'-y'}); "
                           "print(a.yes, a.remove, rest)"], cwd=flow.folder, env=shim_env(),
                          capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["None", "['A']", "['-y',", "'3']"], done.stderr


def test_b2luigis_default_empty_remove_lists_remove_nothing(workflow) -> None:
    """b2luigi's ``process(..., remove=[], remove_only=[])`` defaults mean: remove nothing, run."""
    flow = workflow("b2luigi_style.py")
    assert flow.run().returncode == 0
    code = ("import b2luigi_style as w, b2luigi; b2luigi.set_setting('result_dir', 'results'); "
            "b2luigi.process(w.Summary(), remove=[], remove_only=[], auto_confirm=True); print('returned')")
    done = subprocess.run([sys.executable, "-c", code], cwd=flow.folder, env=shim_env(), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Remov" not in done.stdout and "Nothing to remove" not in done.stdout, done.stdout
    assert done.stdout.strip().endswith("returned")
    assert _outputs(flow.folder) == {"reco.txt": 1, "sim.txt": 2, "summary.txt": 1}
