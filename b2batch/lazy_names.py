"""Names a package offers but imports when first used (PEP 562), so that importing the package stays cheap.

A package's ``__init__`` says where each name comes from and takes the two module functions::

    __getattr__, __dir__ = lazy_names(__name__, globals(), {"Run": "b2batch.engine.run"})

``submodules`` names modules offered as attributes (name -> module). Each name is looked up once and then kept in
the package's namespace. This module imports nothing of b2batch: the engine, a pilot and a job on a node use it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_names(package: str, namespace: dict[str, Any], sources: dict[str, str],
               submodules: dict[str, str] | None = None) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package`` whose names ``sources`` maps to their modules."""
    modules = dict(submodules or {})

    def __getattr__(name: str) -> Any:
        if name in modules:
            return importlib.import_module(modules[name])
        module = sources.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = namespace[name] = getattr(importlib.import_module(module), name)  # looked up once
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *sources, *modules})

    return __getattr__, __dir__
