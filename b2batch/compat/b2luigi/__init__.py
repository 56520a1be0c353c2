"""b2luigi's module paths, for scripts that import them (``from b2luigi.core.utils import product_dict``).

The shim distribution in ``compat/b2luigi-shim`` (``pip install ./compat/b2luigi-shim``) makes a top-level
``b2luigi`` package of b2batch and registers these modules under b2luigi's names with :func:`install_aliases`.
"""

from __future__ import annotations

import importlib
import sys

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


def install_aliases(package: str = "b2luigi") -> None:
    """Register each of :data:`MODULES` as ``<package>.<name>`` in ``sys.modules`` and as attributes of
    their parents, so that ``import b2luigi.core.utils`` finds this package's module."""
    root = sys.modules[package]
    for name in MODULES:
        module = importlib.import_module(f"{__name__}.{name}")
        sys.modules[f"{package}.{name}"] = module
        parent_name, _, leaf = name.rpartition(".")
        parent = sys.modules[f"{package}.{parent_name}"] if parent_name else root
        setattr(parent, leaf, module)
