"""b2luigi's module paths, for scripts that import them (``from b2luigi.core.utils import product_dict``).

The shim distribution in ``compat/b2luigi-shim`` (``pip install ./compat/b2luigi-shim``) makes a top-level
``b2luigi`` package of b2batch and registers these modules under b2luigi's names with :func:`install_aliases`.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from types import ModuleType

from b2batch.settings import use_profile

#: A workflow that imports b2luigi's names is written against b2luigi: b2luigi 1.3's defaults apply
#: (``b2batch.settings.PROFILES``); settings given anywhere still win.
use_profile("b2luigi")

#: The modules mirrored here, by their name below ``b2luigi``.
MODULES = ("core", "core.utils", "core.settings", "core.executable", "core.dispatchable_task",
           "core.task", "core.target", "core.parameter", "core.temporary_wrapper",
           "core.remote_target", "core.remote_target.xrootd", "core.remote_target.webdav",
           "batch", "batch.processes", "batch.processes.lsf", "batch.processes.htcondor",
           "batch.processes.slurm",
           "batch.processes.apptainer", "batch.processes.gbasf2", "batch.processes.test", "batch.workers",
           "batch.cache", "cli", "cli.process", "contrib", "contrib.gbasf2")


class _AliasFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``<package>.<name>`` for any module ``b2batch.compat.b2luigi.<name>`` not in :data:`MODULES`
    (the command line's ``b2luigi.cli.utils``, ``b2luigi.cli.apps.show``, ...: imported when asked for, as
    they need typer), and gives the very same module object, never a second copy under the other name."""

    def __init__(self, package: str) -> None:
        self.package = package

    def _target(self, fullname: str) -> str | None:
        if not fullname.startswith(self.package + "."):
            return None
        target = f"{__name__}.{fullname[len(self.package) + 1:]}"
        try:
            return target if importlib.util.find_spec(target) is not None else None
        except ImportError:
            return None

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> object:
        mirrored = self._target(fullname)
        if mirrored is None:
            return None
        return importlib.util.spec_from_loader(fullname, self, origin=mirrored)

    def create_module(self, spec: object) -> None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        # The import system takes what sys.modules holds after this call: the mirrored module itself.
        sys.modules[module.__name__] = importlib.import_module(module.__spec__.origin)  # type: ignore[union-attr]


def install_aliases(package: str = "b2luigi") -> None:
    """Register each of :data:`MODULES` as ``<package>.<name>`` in ``sys.modules`` and as attributes of
    their parents, so that ``import b2luigi.core.utils`` finds this package's module; any other module of
    this package is found under ``<package>.`` when first imported."""
    root = sys.modules[package]
    if not any(isinstance(f, _AliasFinder) and f.package == package for f in sys.meta_path):
        sys.meta_path.insert(0, _AliasFinder(package))
    for name in MODULES:
        module = importlib.import_module(f"{__name__}.{name}")
        sys.modules[f"{package}.{name}"] = module
        parent_name, _, leaf = name.rpartition(".")
        parent = sys.modules[f"{package}.{parent_name}"] if parent_name else root
        setattr(parent, leaf, module)
