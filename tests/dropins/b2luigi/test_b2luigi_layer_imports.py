"""The b2luigi layer on b2batch's public API (issue 40, must-have 4): the tripwire.

The layer is the shim's ``b2luigi`` package (``compat/b2luigi-shim/b2luigi/``). Every name it takes from b2batch
(``from b2batch.x import y``, and ``m.y`` of a b2batch module ``m`` it imported) must be public: ``b2batch.<name>``
for a name of ``b2batch.__all__``, a module of ``b2batch.PUBLIC_MODULES``, or ``<module>.<name>`` for a name of
that module's ``__all__``. Anything else (a name with a leading underscore, another module, a name outside
``__all__``) fails the test: the layer is b2luigi's API on top of b2batch's public API, nothing more.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import subprocess
import sys
from pathlib import Path

import b2batch

ROOT = Path(__file__).resolve().parents[3]
SHIM = ROOT / "compat" / "b2luigi-shim" / "b2luigi"


def layer_files() -> list[Path]:
    """The source files of the b2luigi layer."""
    return sorted(SHIM.rglob("*.py"))


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
                used.add(full)
                if _is_module(full):
                    modules[alias.asname or alias.name] = full
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "b2batch":
                    used.add(alias.name)
                    modules[alias.asname or alias.name] = alias.name
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules:
            used.add(f"{modules[node.value.id]}.{node.attr}")
    return used


def public_names() -> set[str]:
    """b2batch's public API: the package and each name of ``b2batch.__all__`` (``from b2batch import *``
    and ``__all__`` itself, which the shim re-exports, too), each module of ``b2batch.PUBLIC_MODULES`` and the
    names of its ``__all__`` that do not start with ``_``."""
    public = {"b2batch", "b2batch.*", "b2batch.__all__", *(f"b2batch.{name}" for name in b2batch.__all__)}
    for module in b2batch.PUBLIC_MODULES:
        public.add(module)
        public.update(f"{module}.{name}" for name in importlib.import_module(module).__all__
                      if not name.startswith("_"))
    return public


def private_uses(files: list[Path] | None = None) -> dict[str, list[str]]:
    """Each non-public b2batch name the layer (or ``files``) uses, with the files that use it."""
    public = public_names()
    found: dict[str, list[str]] = {}
    for path in layer_files() if files is None else files:
        for name in names_used(path) - public:
            found.setdefault(name, []).append(path.name)
    return found


def test_the_layer_takes_from_b2batch_only_public_names() -> None:
    found = private_uses()
    assert not found, ("the b2luigi layer imports private names of b2batch; use b2batch's public API "
                       f"(b2batch.__all__, b2batch.PUBLIC_MODULES) or make the name public and document it: {found}")


def test_every_public_module_documents_its_names() -> None:
    """Each public module lists its names in ``__all__``, each of them there and documented."""
    for module_name in b2batch.PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        assert module.__doc__, module_name
        for name in module.__all__:
            value = getattr(module, name)
            if callable(value) and not isinstance(value, type(sys)):
                assert value.__doc__, f"{module_name}.{name} has no docstring"


def test_the_tripwire_sees_private_imports(tmp_path: Path) -> None:
    """The check itself: a private name, a module outside the public list and a name outside a public module's
    ``__all__`` are each found; public ones are not."""
    made_up = tmp_path / "made_up.py"
    made_up.write_text("from b2batch.engine import Run\nfrom b2batch.settings import _NOT_SET, get_setting\n"
                       "from b2batch import systems, Task\nimport b2batch.luigi_frontend.jobs as jobs\n"
                       "systems.detect(); systems._plugins(); jobs.TaskJobs\n")
    assert set(private_uses([made_up])) == {"b2batch.engine.Run", "b2batch.settings._NOT_SET",
                                             "b2batch.systems._plugins", "b2batch.luigi_frontend.jobs",
                                             "b2batch.luigi_frontend.jobs.TaskJobs"}


def test_import_b2luigi_works_from_any_folder(tmp_path: Path) -> None:
    """From an empty folder, and from one holding folders named like b2luigi's and b2batch's packages."""
    (tmp_path / "b2batch").mkdir()
    (tmp_path / "core").mkdir()
    for cwd in (tmp_path, tmp_path / "core", Path("/")):
        done = subprocess.run([sys.executable, "-c", "import b2luigi, b2luigi.core.utils; print(b2luigi.Task)"],
                              cwd=cwd, capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, (cwd, done.stderr[-2000:])
        assert "b2batch" in done.stdout, done.stdout


def test_b2batch_holds_no_b2luigi_code() -> None:
    """b2batch has no b2luigi layer of its own (it is the shim's), and running b2batch's workflow machinery
    loads none of the shim's modules."""
    assert not (ROOT / "b2batch" / "compat").exists()
    done = subprocess.run([sys.executable, "-c", "import sys, b2batch; from b2batch.luigi_frontend import workflow, "
                           "jobs, task_on_node; b2batch.Task; print(sorted(m for m in sys.modules if m.split('.')[0] == "
                           "'b2luigi'))"], capture_output=True, text=True, timeout=120, check=True, cwd="/")
    assert done.stdout.strip() == "[]", done.stdout
