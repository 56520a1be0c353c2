"""The b2luigi layer on b2batch's public API (issue 40, must-have 4): the tripwire.

The layer is the shim's ``b2luigi`` package, ``b2batch/compat/b2luigi/`` and ``b2batch/luigi_frontend/b2luigi_*.py``.
Every name it takes from b2batch outside itself (``from b2batch.x import y``, and ``m.y`` of a b2batch module
``m`` it imported) is either public, ``b2batch.<name>`` for a name of ``b2batch.__all__`` (the API that README.md
and docs/ document), or one of ``KNOWN_PRIVATE``: the layer's debt, listed also in docs/migrating.md ("The b2luigi
layer and b2batch's public API"). A new private import fails the first test; a debt paid (a name no longer used)
fails the second, so that the list only shrinks.
"""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

import b2batch

ROOT = Path(__file__).resolve().parents[3]
SHIM = ROOT / "compat" / "b2luigi-shim" / "b2luigi"

#: Private names of b2batch the layer uses today (2026-11, 35 entries: 30 names and the 5 modules they come
#: from): what moving the layer into the shim's distribution still needs b2batch to make public or to offer
#: another way (the b2luigi profile's settings, the job runner's entry points, the output layout).
KNOWN_PRIVATE = frozenset({
    "b2batch.engine.Run",
    "b2batch.luigi_frontend.batch_worker",
    "b2batch.luigi_frontend.batch_worker.run_here",
    "b2batch.luigi_frontend.batch_worker.run_task_of_id",
    "b2batch.luigi_frontend.cli.B2LUIGI_FLAGS",
    "b2batch.luigi_frontend.generators.CliUserError",
    "b2batch.luigi_frontend.jobs.RunContext",
    "b2batch.luigi_frontend.jobs.TaskJobs",
    "b2batch.luigi_frontend.jobs.task_files",
    "b2batch.luigi_frontend.layout",
    "b2batch.luigi_frontend.layout.log_folder",
    "b2batch.luigi_frontend.layout.output_path",
    "b2batch.luigi_frontend.layout.path_value",
    "b2batch.luigi_frontend.node.import_file_as",
    "b2batch.luigi_frontend.temporary.temporary_files",
    "b2batch.paths",
    "b2batch.paths.base_dir_pinned",
    "b2batch.paths.pinned_base_dir",
    "b2batch.remote.RemoteFileSystem",
    "b2batch.remote.base.RemoteFileSystem",
    "b2batch.runconfig.run_config",
    "b2batch.settings.DeprecatedSettingsWarning",
    "b2batch.settings.RENAMED_SETTINGS",
    "b2batch.settings.SETTINGS_ENV_VARS",
    "b2batch.settings.find_setting",
    "b2batch.settings.fresh_code_settings",
    "b2batch.settings.profiled_error",
    "b2batch.settings.settings_files",
    "b2batch.settings.settings_snapshot",
    "b2batch.settings.use_profile",
    "b2batch.systems",
    "b2batch.systems.detect",
    "b2batch.systems.known_systems",
    "b2batch.systems.system_class",
    "b2batch.systems.system_name_of",
})


def layer_files() -> list[Path]:
    """The source files of the b2luigi layer."""
    return [*sorted((ROOT / "b2batch" / "compat" / "b2luigi").rglob("*.py")),
            *sorted((ROOT / "b2batch" / "luigi_frontend").glob("b2luigi_*.py")), *sorted(SHIM.rglob("*.py"))]


def _in_layer(module: str) -> bool:
    return module.startswith(("b2batch.compat.b2luigi", "b2batch.luigi_frontend.b2luigi_")) or module == "b2luigi"


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def names_used(path: Path) -> set[str]:
    """The dotted b2batch names (outside the layer) that ``path`` imports or reads from a b2batch module it
    imported."""
    tree = ast.parse(path.read_text())
    used: set[str] = set()
    modules: dict[str, str] = {}  # local name -> b2batch module
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "b2batch":
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if _in_layer(node.module) or _in_layer(full):
                    continue
                used.add(full)
                if _is_module(full):
                    modules[alias.asname or alias.name] = full
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "b2batch" and not _in_layer(alias.name):
                    used.add(alias.name)
                    modules[alias.asname or alias.name] = alias.name
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules:
            used.add(f"{modules[node.value.id]}.{node.attr}")
    return used


def public_names() -> set[str]:
    """b2batch's documented API: the package and each name of ``b2batch.__all__`` (``from b2batch import *``
    and ``__all__`` itself, which the shim re-exports, too)."""
    return {"b2batch", "b2batch.*", "b2batch.__all__", *(f"b2batch.{name}" for name in b2batch.__all__)}


def private_uses() -> dict[str, list[str]]:
    """Each non-public b2batch name the layer uses, with the files that use it."""
    public = public_names()
    found: dict[str, list[str]] = {}
    for path in layer_files():
        for name in names_used(path) - public:
            found.setdefault(name, []).append(str(path.relative_to(ROOT)))
    return found


def test_the_layer_takes_from_b2batch_only_public_names_and_its_listed_debt() -> None:
    new = {name: files for name, files in private_uses().items() if name not in KNOWN_PRIVATE}
    assert not new, ("the b2luigi layer imports private names of b2batch; use b2batch's public API (b2batch.__all__) "
                     f"or make the name public and document it: {new}")


def test_the_listed_debt_is_still_owed() -> None:
    paid = KNOWN_PRIVATE - set(private_uses())
    assert not paid, f"no longer used by the layer: take them out of KNOWN_PRIVATE and docs/migrating.md: {paid}"


def test_the_debt_is_written_down_in_the_migration_guide() -> None:
    text = (ROOT / "docs" / "migrating.md").read_text()
    assert "### The b2luigi layer and b2batch's public API" in text
    assert f"{len(KNOWN_PRIVATE)} private names" in text


def test_import_b2luigi_works_from_any_folder(tmp_path: Path) -> None:
    """From an empty folder, and from one holding folders named like b2luigi's and b2batch's packages."""
    (tmp_path / "b2batch").mkdir()
    (tmp_path / "core").mkdir()
    for cwd in (tmp_path, tmp_path / "core", Path("/")):
        done = subprocess.run([sys.executable, "-c", "import b2luigi, b2luigi.core.utils; print(b2luigi.Task)"],
                              cwd=cwd, capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, (cwd, done.stderr[-2000:])
        assert "b2batch" in done.stdout, done.stdout
