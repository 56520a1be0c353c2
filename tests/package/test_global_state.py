"""Tripwire: no process-wide mutable state in b2batch beyond the listed, known places.

A run owns its configuration and its jobs. Module-level state that one run changes leaks into the next run in
the same process (a notebook, a test session, a joblib call after a Pool). This test reads every module of
the package (its text, without importing it) and lists:

* module-level names bound to a mutable value (a dict, list or set display or comprehension, or a call of
  ``dict``, ``list``, ``set``, ``defaultdict``, ``OrderedDict``, ``deque``, ``Counter``, a weak container,
  ``itertools.count``, ``threading.local`` or of any class) whose name is not a CONSTANT (upper case: read-only tables);
* ``global NAME`` statements (a function that rebinds module state);
* assignments to an attribute of another b2batch module (``paths._pinned_base_dir = ...``).

``KNOWN`` holds what exists today, each with why it is there; a new entry fails the test. An entry that no
longer exists fails it too, so that the list only shrinks with the code.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "b2batch"
#: The b2luigi shim's package (b2luigi's API on b2batch's), read too; its modules are keyed ``b2luigi-shim/...``.
SHIM = Path(__file__).resolve().parents[2] / "compat" / "b2luigi-shim"

MUTABLE_CALLS = {"dict", "list", "set", "defaultdict", "OrderedDict", "deque", "Counter", "WeakValueDictionary",
                 "WeakKeyDictionary", "WeakSet", "count", "local"}

#: module (relative to b2batch/) -> {name: why}. Shrink it; never grow it without a reason a reviewer accepts.
KNOWN: dict[str, dict[str, str]] = {
    "settings/__init__.py": {
        "_store": "the settings store in use (set_setting's values, the settings files' cache, the defaults "
                  "profile, b2luigi's process_once mark): process-wide as b2luigi's set_setting is by its "
                  "definition; one object instead of three globals and workflow.py's _process_called",
        "global _store": "using_store() gives a with block (a test, a notebook cell) a store of its own",
    },
    "jobscript/base_folder.py": {"global _pinned_base_dir": "the base folder of relative settings paths in a job (its steering "
                                             "process's) and in console commands and the farm for the length of a "
                                             "with block (base_dir_pinned); a run's own is RunConfig.base_dir; "
                                             "tests and users name theirs with $B2BATCH_BASE_DIR"},
    "luigi_frontend/task_on_node.py": {"global _active_spec": "the job spec of the one task this node process runs"},
    "engine/pilots/unit_processes.py": {"global _hand_over": "set only in a worker's runner process: what the one "
                                        "unit it runs at a time hands back to its worker (its result), cleared "
                                        "before each unit; no steering process has one"},
    "luigi_frontend/task.py": {"global _params_generation": "bumped when a parameter is added to a class after first use, so "
                                             "the per-class parameter cache never goes stale"},
    "remote/existence.py": {"_session": "a ContextVar: scoped per context and reset by its with block, not shared"},
    # b2luigi 1.3's own module-level API, which its users' code and tests import or patch by these names; b2batch's
    # engine never reads them (its runs query schedulers through their own monitors).
    **{f"b2luigi-shim/b2luigi/batch/processes/{system}.py": {
        "_batch_job_status_cache": f"b2luigi's process-wide status cache of {system} jobs, for its process classes"}
       for system in ("htcondor", "lsf", "slurm")},
    "b2luigi-shim/b2luigi/batch/workers.py": {"BatchSystems": "b2luigi's enum of batch systems (with installed plugins), made "
                                                        "once at import"},
    **{f"b2luigi-shim/b2luigi/cli/apps/{name}.py": {f"{name}_app": "b2luigi's typer sub-application of this command"}
       for name in ("batch_runner", "cleanup", "graph", "remove", "run", "show", "tasks", "test")},
    "b2luigi-shim/b2luigi/cli/command.py": {"app": "b2luigi's typer application (the b2luigi command)",
                                      "console": "the rich console the command prints to, as b2luigi's"},
    "b2luigi-shim/b2luigi/cli/errors.py": {"console": "the rich console b2luigi's command errors are printed to"},
    "b2luigi-shim/b2luigi/cli/output.py": {"console": "the rich consoles of b2luigi's runner module (runner.console, "
                                                      "which its users replace to capture the output)",
                                           "stderr_console": "the rich consoles of b2luigi's runner module"},
}


def _call_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Name):
            return func.id
        if isinstance(func, ast.Attribute):
            return func.attr
    return None


def _is_mutable(value: ast.expr | None) -> bool:
    if value is None:
        return False
    if isinstance(value, ast.Dict | ast.List | ast.Set | ast.DictComp | ast.ListComp | ast.SetComp):
        return True
    name = _call_name(value)
    # A call of a class (a capitalised name) makes an object, whose attributes a run could change.
    return name in MUTABLE_CALLS or bool(name and name.lstrip("_")[:1].isupper())


def _is_constant_name(name: str) -> bool:
    bare = name.lstrip("_")
    return bool(bare) and bare.upper() == bare and any(c.isalpha() for c in bare)


def mutable_globals(source: str) -> set[str]:
    """What one module's text holds of process-wide mutable state (see the module's docstring)."""
    tree = ast.parse(source)
    found: set[str] = set()
    b2batch_modules: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("b2batch") or (
                isinstance(node, ast.ImportFrom) and node.level > 0):
            b2batch_modules.update(alias.asname or alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            b2batch_modules.update((alias.asname or alias.name).split(".")[0] for alias in node.names
                                   if alias.name.startswith("b2batch"))
        targets: list[ast.expr] = []
        value: ast.expr | None = None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign):
            targets, value = [node.target], node.value
        for target in targets:
            if (isinstance(target, ast.Name) and _is_mutable(value) and not _is_constant_name(target.id)
                    and not target.id.startswith("__")):
                found.add(target.id)
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            found.update(f"global {name}" for name in node.names)
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                        and target.value.id in b2batch_modules):
                    found.add(f"{target.value.id}.{target.attr} =")
    return found


def package_state() -> dict[str, set[str]]:
    state = {}
    for root, prefix in ((PACKAGE, ""), (SHIM, "b2luigi-shim/")):
        for path in sorted((root / "b2luigi" if root == SHIM else root).rglob("*.py")):
            names = mutable_globals(path.read_text(encoding="utf-8"))
            if names:
                state[prefix + path.relative_to(root).as_posix()] = names
    return state


def test_no_new_process_wide_mutable_state() -> None:
    state = package_state()
    new = {module: sorted(names - set(KNOWN.get(module, {}))) for module, names in state.items()}
    new = {module: names for module, names in new.items() if names}
    assert not new, (
        "new process-wide mutable state (a run must own its state; pass it through the run or its config, or, "
        f"for a read-only table, name it in CAPITALS and do not change it): {new}")


def test_the_known_list_only_names_what_exists() -> None:
    state = package_state()
    gone = {module: sorted(set(names) - state.get(module, set())) for module, names in KNOWN.items()}
    gone = {module: names for module, names in gone.items() if names}
    assert not gone, f"these are gone from the code: remove them from KNOWN: {gone}"


def test_the_scanner_sees_each_kind() -> None:
    source = ("from b2batch import paths\n_cache = {}\nseen: list[int] = []\nTABLE = {'a': 1}\n"
              "def f():\n    global counter\n    paths._pinned = 1\n")
    assert mutable_globals(source) == {"_cache", "seen", "global counter", "paths._pinned ="}
