"""Tripwire: the arrows of the package point one way, and no module imports itself around a circle.

Every module under ``b2batch/`` is read with ``ast`` (nothing is imported). Its imports are those anywhere in
the module, in functions too, except under ``if TYPE_CHECKING:`` (never run). The test fails when a module
under ``engine/`` or ``systems/`` imports a front-end, luigi, jinja2, the settings store or the job wrapper
(the engine and the batch systems read a run's configuration from its RunConfig, and get job scripts from
the front-end), and when the package's imports make a circle (a package's ``__init__`` re-exporting its own
modules is no circle).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "b2batch"

LOWER = ("b2batch.engine", "b2batch.systems")
#: What the engine and the batch systems must not import: (prefix, why).
FORBIDDEN = (
    ("b2batch.luigi_frontend", "a front-end"), ("b2batch.calls", "a front-end"), ("b2batch.joblib", "a front-end"),
    ("b2batch.pool", "a front-end"), ("b2batch.farm", "a front-end"), ("b2batch.display", "a front-end"),
    ("b2batch.compat", "a front-end"), ("b2batch.remote", "a front-end"),
    ("luigi", "luigi"), ("jinja2", "jinja"), ("b2batch.settings", "the settings store (use run.config)"),
    ("b2batch.jobscript.wrapper", "the job wrapper, which reads settings (use run.config.job_wrapper)"),
    ("b2batch.jobscript.containers", "the containers of the job wrapper, which read settings"),
    ("b2batch.runconfig", "the front-ends' way to read a RunConfig from the settings"),
)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node.test):
            skipped.update(id(sub) for stmt in node.body for sub in ast.walk(stmt))
    return skipped


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
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def _graph() -> dict[str, set[str]]:
    return {name: {i for i in imports_of(name, path) if i in MODULES and i != name} for name, path in MODULES.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of more than one module (Tarjan), without those made only of a package and
    its own modules."""
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
    return [part for part in found if not all(m.startswith(min(part, key=len)) for m in part)]


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
    assert circles({"b2batch.x": {"b2batch.x.y"}, "b2batch.x.y": {"b2batch.x"}}) == []
    module = tmp_path / "b2batch" / "systems" / "made_up.py"
    module.parent.mkdir(parents=True)
    module.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from b2batch.jobscript import wrapper\n"
                      "def f():\n    from ..settings import get_setting\n")
    assert imports_of("b2batch.systems.made_up", module) >= {"b2batch.settings", "b2batch.settings.get_setting"}
    assert "b2batch.jobscript.wrapper" not in imports_of("b2batch.systems.made_up", module)
