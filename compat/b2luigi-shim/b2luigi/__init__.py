"""``b2luigi``, played by b2batch: ``import b2luigi`` gives b2batch's API, and b2luigi's module paths
(``b2luigi.core.utils``, ``b2luigi.core.settings``, ``b2luigi.batch.processes``, ``b2luigi.cli`` ...) are this
package's modules: b2luigi 1.3's API on top of b2batch's public API (``b2batch.__all__`` and the modules of
``b2batch.PUBLIC_MODULES``; ``tests/dropins/b2luigi/test_b2luigi_layer_imports.py`` keeps it so). Importing it
chooses b2luigi 1.3's defaults for the process (the settings profile ``b2luigi``), and ``b2luigi.get_setting``
answers as b2luigi's does. Not installed with b2batch: ``pip install ./compat/b2luigi-shim``.
"""

import importlib
import importlib.machinery
import importlib.util
import sys
from typing import Any


def _import_b2batch_past_namespace_folders() -> None:
    """Import b2batch itself where a folder named ``b2batch`` without ``__init__.py`` (data, a build folder)
    lies in the script's folder: Python's path finder, which looks at ``sys.path`` first, would make that folder
    an empty namespace package and hide an editable install of b2batch, whose finder comes after it on
    ``sys.meta_path`` (a regular install in site-packages wins over such a folder anyway)."""
    if "b2batch" in sys.modules:
        return
    spec = importlib.util.find_spec("b2batch")
    if spec is None or spec.origin not in (None, "namespace"):
        return  # b2batch is a regular package (or not installed: the import below says so)
    for finder in sys.meta_path:
        if finder is importlib.machinery.PathFinder or not hasattr(finder, "find_spec"):
            continue
        found = finder.find_spec("b2batch", None)
        if found is not None and found.loader is not None and found.origin not in (None, "namespace"):
            module = importlib.util.module_from_spec(found)
            sys.modules["b2batch"] = module
            found.loader.exec_module(module)
            return


_import_b2batch_past_namespace_folders()

import b2batch  # noqa: E402
from b2batch import *  # noqa: F401,F403
from b2batch import __all__, __version__  # noqa: F401
from b2batch.settings import use_profile  # noqa: E402

#: A workflow that imports b2luigi's names is written against b2luigi: b2luigi 1.3's defaults apply
#: (``b2batch.settings.PROFILES``); settings given anywhere still win.
use_profile("b2luigi")

from b2luigi.cli.process import build  # noqa: F401  (warns that process() is meant)
from b2luigi.core.settings import get_setting  # noqa: F401  (b2luigi's signature and answers)
from b2luigi.core.settings import _setting_file_iterator  # noqa: F401  (b2luigi exports it)


#: b2luigi's WebDAV classes, through webdavclient3 when it is installed (b2luigi.core.remote_target.webdav);
#: looked up when first asked for, as that client takes a while to import.
_WEBDAV = ("WebDAVSystem", "WebDAVTarget")
for _name in _WEBDAV:
    globals().pop(_name, None)


def __getattr__(name: str) -> Any:
    """Anything else of b2batch's (looked up when asked for, so that later b2batch names are there too)."""
    if name in _WEBDAV:
        from b2luigi.core.remote_target import webdav

        return getattr(webdav, name)
    return getattr(b2batch, name)


#: b2luigi's modules that ``import b2luigi`` loads, as b2luigi 1.3's does (``b2luigi.core.utils`` is an attribute
#: at once); the command line's (``b2luigi.cli.utils``, ``b2luigi.cli.apps.show`` ...) load when imported, as
#: they need typer.
_MODULES = ("core", "core.utils", "core.settings", "core.executable", "core.dispatchable_task",
           "core.task", "core.target", "core.parameter", "core.temporary_wrapper",
           "core.remote_target", "core.remote_target.xrootd", "core.remote_target.webdav",
           "batch", "batch.processes", "batch.processes.lsf", "batch.processes.htcondor",
           "batch.processes.slurm",
           "batch.processes.apptainer", "batch.processes.gbasf2", "batch.processes.test", "batch.workers",
           "batch.cache", "cli", "cli.process", "contrib", "contrib.gbasf2")

for _module in _MODULES:
    importlib.import_module(f"{__name__}.{_module}")
del _module
