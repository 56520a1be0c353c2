"""Tripwire: the arrows of the package point one way, and no module imports itself around a circle.

Every module under ``b2batch/`` and of the b2luigi shim (``compat/b2luigi-shim/b2luigi/``) is read with ``ast``
(nothing is imported). Its imports are those anywhere in the module, in functions too, except under
``if TYPE_CHECKING:`` (never run). ``from package import name`` is an import of the module ``package.name`` when
there is one (as ``import package.name`` is), else of ``package`` itself. The test fails when a module under
``engine/`` or ``systems/`` imports a front-end, luigi, jinja2, the settings store or the job wrapper (the engine
and the batch systems read a run's configuration from its RunConfig, and get job scripts from the front-end),
when the imports make a circle anywhere (inside one package too: a module that imports its package's
``__init__`` while that ``__init__`` imports it is a circle), and when luigi front-end code (or any new module)
sits at the package's root.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "b2batch"
#: The b2luigi shim's package: b2luigi's API on b2batch's (``compat/b2luigi-shim/b2luigi/``).
SHIM = ROOT / "compat" / "b2luigi-shim" / "b2luigi"

LOWER = ("b2batch.engine", "b2batch.systems")
#: What the engine and the batch systems must not import: (prefix, why).
FORBIDDEN = (
    ("b2batch.luigi_frontend", "a front-end"), ("b2batch.calls", "a front-end"), ("b2batch.joblib", "a front-end"),
    ("b2batch.pool", "a front-end"), ("b2batch.farm", "a front-end"), ("b2batch.display", "a front-end"),
    ("b2batch.compat", "a front-end"), ("b2batch.remote", "a front-end"),
    ("luigi", "luigi"), ("jinja2", "jinja"), ("b2batch.settings", "the settings store (use run.config)"),
    ("b2batch.jobscript.wrapper", "the job wrapper, which reads settings (use run.config.job_wrapper)"),
    ("b2batch.jobscript.containers", "the containers of the job wrapper, which read settings"),
    ("b2batch.settings.runconfig", "the front-ends' way to read a RunConfig from the settings"),
    ("b2batch.jobscript.base_folder", "the process's base folder (use run.config.base_dir and run.config.resolve)"),
)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SHIM.parent if path.is_relative_to(SHIM) else ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in [*sorted(PACKAGE.rglob("*.py")), *sorted(SHIM.rglob("*.py"))]}


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node.test):
            skipped.update(id(sub) for stmt in node.body for sub in ast.walk(stmt))
    return skipped


@functools.cache
def imports_of(name: str, path: Path) -> set[str]:
    """The names ``name`` imports: modules, and ``module.attribute`` for ``from module import attribute``."""
    tree = ast.parse(path.read_text(), str(path))
    skipped = _type_checking_nodes(tree)
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                package = package[:len(package) - (node.level - 1)]
                base = ".".join(package + ([base] if base else []))
            names = [f"{base}.{alias.name}" for alias in node.names]
            found.update(names)
            if not all(n in MODULES for n in names):  # a name of the package itself, not only its modules
                found.add(base)
    return found


@functools.cache
def _graph() -> dict[str, set[str]]:
    return {name: {i for i in imports_of(name, path) if i in MODULES and i != name} for name, path in MODULES.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of more than one module (Tarjan): every circle, inside one package too."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


@pytest.mark.parametrize("name", sorted(m for m in MODULES if m.startswith(LOWER)))
def test_the_engine_and_the_batch_systems_import_no_front_end_luigi_jinja_or_settings(name: str) -> None:
    bad = sorted(f"{i} ({why})" for i in imports_of(name, MODULES[name]) for prefix, why in FORBIDDEN
                 if i == prefix or i.startswith(prefix + "."))
    assert not bad, f"{name} imports {', '.join(bad)}"


def test_the_package_has_no_import_circle() -> None:
    found = circles(_graph())
    assert not found, "import circles: " + "; ".join(" <-> ".join(part) for part in found)


def test_the_tripwire_sees_a_circle_and_a_forbidden_import(tmp_path: Path) -> None:
    """The checks themselves: a made-up circle and a made-up import of settings under systems/ are found."""
    assert circles({"b2batch.a": {"b2batch.b"}, "b2batch.b": {"b2batch.a"}, "b2batch.c": set()}) == [
        ["b2batch.a", "b2batch.b"]]
    assert circles({"b2batch.x": {"b2batch.x.y"}, "b2batch.x.y": {"b2batch.x"}}) == [["b2batch.x", "b2batch.x.y"]]
    module = tmp_path / "b2batch" / "systems" / "made_up.py"
    module.parent.mkdir(parents=True)
    module.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from b2batch.jobscript import wrapper\n"
                      "def f():\n    from ..settings import get_setting\n")
    assert imports_of("b2batch.systems.made_up", module) >= {"b2batch.settings", "b2batch.settings.get_setting"}
    assert "b2batch.jobscript.wrapper" not in imports_of("b2batch.systems.made_up", module)
    # a module of a package imported by name is that module; a name the package's __init__ holds is the package
    other = tmp_path / "b2batch" / "systems" / "made_up_too.py"
    other.write_text("from b2batch.engine import causes\nfrom b2batch.remote import RemoteTarget\n")
    found = imports_of("b2batch.systems.made_up_too", other)
    assert "b2batch.engine.causes" in found and "b2batch.engine" not in found
    assert "b2batch.remote" in found


#: The modules the package root may hold (besides its folders): its face (``__init__``: the lazy re-exports),
#: the console script's entry (``__main__``) and the errors every layer raises. Everything else lives in a
#: folder of its layer (issue 41: the console commands in ``command/``, the base folder in ``jobscript/``, the
#: run's resolver in ``settings/``).
#: (lazy_names: the lazy names of every package's __init__, b2batch's own included: no layer owns it)
ROOT_MODULES = {"b2batch.__main__", "b2batch.errors", "b2batch.lazy_names"}
#: What marks a module as luigi front-end code: it imports luigi or the luigi front-end.
LUIGI = ("luigi", "b2batch.luigi_frontend")


def _at_the_root(path: Path) -> bool:
    return path.parent.name == "b2batch" and path.name != "__init__.py"


def luigi_code_at_the_root(modules: dict[str, Path]) -> list[str]:
    """Modules directly in ``b2batch/`` that are luigi front-end code (they import luigi or the luigi
    front-end), other than the console script, which only dispatches to it."""
    return sorted(name for name, path in modules.items() if _at_the_root(path) and name != "b2batch.__main__"
                  and any(i == p or i.startswith(p + ".") for i in imports_of(name, path) for p in LUIGI))


def test_no_luigi_front_end_module_sits_at_the_package_root() -> None:
    found = luigi_code_at_the_root(MODULES)
    assert not found, f"luigi front-end code at the package root (move it into b2batch/luigi_frontend/): {found}"
    extra = sorted(name for name, path in MODULES.items() if _at_the_root(path) and name not in ROOT_MODULES)
    assert not extra, (f"new modules at the package root: {extra}; put them in the folder of their layer "
                       f"(luigi_frontend/, jobscript/, engine/, ...) or add them to ROOT_MODULES with a reason")


def test_the_tripwire_sees_luigi_code_at_the_root(tmp_path: Path) -> None:
    """The check itself: a made-up root module that imports luigi (in a function) is found, one that imports it
    only for type checking is not."""
    (tmp_path / "b2batch").mkdir()
    tasky, typed = tmp_path / "b2batch" / "tasky.py", tmp_path / "b2batch" / "typed.py"
    tasky.write_text("def f():\n    import luigi.task\n")
    typed.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from b2batch.luigi_frontend import task\n")
    assert luigi_code_at_the_root({"b2batch.tasky": tasky, "b2batch.typed": typed}) == ["b2batch.tasky"]


def loaded_by(graph: dict[str, set[str]], start: str) -> dict[str, str]:
    """Every b2batch module that importing ``start`` loads (its imports, theirs, and the packages above each),
    each with the module that brings it in."""
    via: dict[str, str] = {start: start}
    todo = [start]
    while todo:
        name = todo.pop()
        parts = name.split(".")
        parents = {".".join(parts[:i]) for i in range(1, len(parts))}
        for other in sorted((graph.get(name, set()) | parents) & set(graph)):
            if other not in via:
                via[other] = name
                todo.append(other)
    return via


#: The one module under which the engine's side may reach jinja2: the templates of submit files.
JINJA_HOME = "b2batch.jobscript.templating"


@pytest.mark.parametrize("name", sorted(m for m in MODULES if m.startswith(LOWER)))
def test_nothing_the_engine_and_the_batch_systems_load_is_a_front_end_luigi_or_settings(name: str) -> None:
    """Not only what a module imports itself: what loading it loads, through every module on the way."""
    graph = _graph()
    via = loaded_by(graph, name)
    bad = []
    for module, parent in sorted(via.items()):
        imported = imports_of(module, MODULES[module]) | {module}
        for prefix, why in FORBIDDEN:
            if prefix == "jinja2" and module == JINJA_HOME:
                continue
            if any(i == prefix or i.startswith(prefix + ".") for i in imported):
                bad.append(f"{module} (loaded through {parent}) is or imports {prefix} ({why})")
    assert not bad, f"loading {name}: " + "; ".join(bad)


def test_the_tripwire_follows_imports_through_other_modules() -> None:
    graph = {"b2batch": set(), "b2batch.engine": set(), "b2batch.engine.a": {"b2batch.jobscript.base_folder"},
             "b2batch.jobscript.base_folder": {"b2batch.settings"}, "b2batch.settings": set(), "b2batch.unused": set()}
    assert loaded_by(graph, "b2batch.engine.a") == {
        "b2batch.engine.a": "b2batch.engine.a", "b2batch": "b2batch.engine.a", "b2batch.engine": "b2batch.engine.a",
        "b2batch.jobscript.base_folder": "b2batch.engine.a", "b2batch.settings": "b2batch.jobscript.base_folder"}


def test_no_two_modules_of_the_package_share_a_name() -> None:
    """A module's name says what it is, once: ``node.py`` three times (the node side of calls, of joblib's
    batches, of a luigi task) or ``monitor.py`` twice (the engine's polling, the terminal view) sent readers to
    the wrong file. Dunder modules (``__init__``, ``__main__``) aside, and the b2luigi shim, whose modules carry
    b2luigi's own names."""
    by_name: dict[str, list[str]] = {}
    for name, path in MODULES.items():
        if name.startswith("b2batch.") and not path.name.startswith("__"):
            by_name.setdefault(path.stem, []).append(name)
    shared = {stem: names for stem, names in by_name.items() if len(names) > 1}
    assert not shared, f"modules that share a name (rename one to say what it is): {shared}"
