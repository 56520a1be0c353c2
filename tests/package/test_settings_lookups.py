"""Tripwire (issue 41, must-have 1): settings are looked up above the engine, once, into a job's JobConfig.

Every module under ``b2batch/`` is read with ``ast`` (nothing is imported). The test fails when

- a module calls ``get_setting`` (or ``find_setting``), or hands it on, that is not listed below as the settings store, a
  resolver, a command-line module, a b2luigi public function that reads settings by its definition, or known debt (a front-end module that still reads its own settings; the
  list shrinks as they are paid: a listed module that no longer calls it fails too, so the list stays true);
- a module under ``engine/``, ``systems/`` or ``jobscript/`` calls ``.setting(...)``, ``.settings(...)`` or a
  ``lookup(...)``, takes a parameter named ``lookup``, or imports the settings store.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "b2batch"

#: The store itself.
STORE = {"b2batch.settings", "b2batch.settings.resolve", "b2batch.settings.declared", "b2batch.settings.typos"}
#: The resolvers: where a front-end turns its unit's (or run's) settings into a JobConfig or a RunConfig.
RESOLVERS = {
    "b2batch.settings.runconfig": "RunConfig of every front-end",
    "b2batch.luigi_frontend.task_settings": "TaskSettings.config_of, the luigi front-end's (and b2luigi's) resolver",
    "b2batch.luigi_frontend.jobs": "TaskJobs, the same resolver's: a task's max_task_failures and b2luigi_texts as "
                                   "its job starts",
    "b2batch.luigi_frontend.task_systems": "batch_system_of(task): a task's batch_system, else the run's, else the "
                                           "settings chain's (for TaskJobs and the run's outcomes)",
    "b2batch.calls.executor": "the calls executor's (joblib, Pool): CallSettings",
    "b2batch.farm.farm_pilots": "the farm's: FarmSettings",
    "b2batch.joblib.options": "joblib's backend options over the settings",
    "b2batch.joblib.parallel_run": "joblib's job_shape and pilot_jobs of a batch of calls",
    "b2batch.pool.pool": "Pool's settings={...} over the settings",
    "b2batch.luigi_frontend.file_settings": "FileSettings: a task's scratch_dir, remote_retries and "
                                            "n_download_threads, read once per run() (on_temporary_files) or "
                                            "output()/remove_output() call and handed to the remote file systems "
                                            "and the staging of inputs as values",
}
#: The command-line modules (a process's entry: which folders, which run).
COMMAND_LINE = {
    "b2batch.command.console": "b2batch status/cancel/show: the task and log folders",
    "b2batch.display.report_commands": "b2batch report/monitor/timeline: the log folder",
    "b2batch.luigi_frontend.retry_command": "b2batch retry: the task folder whose failure counts it resets",
    "b2batch.luigi_frontend.workflow": "process(): the run's flags and modes",
}
#: b2luigi's public functions, whose documented meaning is to read a task's settings when they are called (in the
#: steering process and in the task's job alike; a task's attribute overrides per call): the b2luigi layer's API.
B2LUIGI_API = {
    "b2batch.luigi_frontend.task": "b2luigi's Task methods add_to_output and remove_output: result_dir, "
                                   "default_task_target_class, target_class_kwargs, b2luigi_texts of the task when "
                                   "called (its scratch_dir and remote_retries through FileSettings)",
    "b2batch.luigi_frontend.layout": "a task's paths, asked with the task alone (b2luigi's create_output_file_name, "
                                     "get_log_file_dir and get_task_file_dir through the shim, the Task methods "
                                     "above): parameter_separator, use_parameter_name_in_output, result_dir, "
                                     "log_dir, task_file_dir, job_folder_layout of the task when called",
    "b2batch.luigi_frontend.dispatching": "b2luigi's @dispatch: the task's env_script and env when its run() is "
                                          "called (in its job)",
    "b2batch.remote.base": "b2luigi's RemoteTarget (b2luigi.core.remote_target): get_temporary_input(task) reads "
                           "the given task's scratch_dir when called, as b2luigi 1.3's does (a target is made by "
                           "the task that writes it and read by others, each with its own scratch_dir); without a "
                           "task (open(), b2batch's own targets' temporary_path()) the process's",
    "b2batch.remote.webdav": "b2luigi's WebDAVSystem(server_path) (b2luigi.core.remote_target.webdav without "
                             "webdavclient3): X509_USER_PROXY and X509_CERT_DIR from the settings, else the "
                             "environment, when the file system is made, as b2luigi 1.3's; process-wide, no task",
}
#: Front-end modules that still read settings themselves (for a task, not for its job): known debt (none now).
KNOWN_DEBT: dict[str, str] = {}
ALLOWED = STORE | set(RESOLVERS) | set(COMMAND_LINE) | set(B2LUIGI_API) | set(KNOWN_DEBT)
BELOW = ("b2batch.engine", "b2batch.systems", "b2batch.jobscript")
LOOKUPS = {"get_setting", "find_setting"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _called(node: ast.Call) -> str:
    func = node.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def calls_of(path: Path) -> set[str]:
    """The names of the functions and methods ``path`` calls or hands on (``lookup or get_setting``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call):
            found.add(_called(node))
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            found.add(node.id)
    return found


def test_get_setting_is_called_only_by_the_store_resolvers_command_line_b2luigis_api_and_known_debt() -> None:
    calling = {name for name, path in MODULES.items() if calls_of(path) & LOOKUPS}
    assert sorted(calling - ALLOWED) == [], "look settings up in the front-end's resolver, into the job's JobConfig"
    paid = sorted((set(RESOLVERS) | set(COMMAND_LINE) | set(B2LUIGI_API) | set(KNOWN_DEBT)) - calling)
    assert paid == [], "these no longer look settings up: take them off the lists"


def test_nothing_below_the_front_ends_looks_a_setting_up() -> None:
    found = []
    for name, path in MODULES.items():
        if not name.startswith(BELOW):
            continue
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _called(node) in ("setting", "settings", "lookup", *LOOKUPS):
                found.append(f"{name}:{node.lineno} calls {_called(node)}()")
            elif isinstance(node, ast.arg) and node.arg == "lookup":
                found.append(f"{name}:{node.lineno} takes a lookup parameter")
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                modules = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                if any(m == "b2batch.settings" or m.startswith("b2batch.settings.") for m in modules):
                    found.append(f"{name}:{node.lineno} imports the settings store")
    assert found == [], "read job.config (a JobConfig the front-end resolved), never the settings store"


def test_the_tripwire_sees_a_lookup(tmp_path: Path) -> None:
    module = tmp_path / "made_up.py"
    module.write_text("from b2batch.settings import get_setting\n\ndef f(job):\n    return job.setting('x') or "
                      "get_setting('y')\n")
    assert {"setting", "get_setting"} <= calls_of(module)
