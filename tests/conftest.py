"""Fixtures shared by b2batch's tests: every test runs in its own folder with clean settings.

* ``isolated`` (autouse): the test's working directory is ``tmp_path``, relative settings paths resolve
  against it (``$B2BATCH_BASE_DIR``), its settings live in a settings store of its own
  (``settings.using_store(settings.Store())``: nothing set in code, no cached files, b2batch's profile), and
  no settings file is named by an environment variable. It patches no module of b2batch.
* ``workflow``: copies a script of ``tests/workflows/`` (with any modules it imports) into ``tmp_path`` and
  runs it as a real subprocess: ``workflow("flags.py").run("--dry-run")``.
* ``weird_tmp_path``: a folder whose name is hostile to shells, ``a'; echo foo`` (submitit's idea).
* ``wait_for(predicate, timeout, what)``: poll until something a test waits for holds.
* ``slurm``, ``sge``: the local cluster must be up (``tests/clusters/``); skipped without it, failed under CI.

Helpers shared by several test folders live in ``tests/helpers/``; ``helpers/tiers.py`` marks the tests that
start workflow processes or need a cluster ``slow`` and puts tests that share a cluster in one xdist group.
"""

from __future__ import annotations

import importlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from b2batch.jobscript import base_folder
from b2batch import settings
from helpers import tiers
from helpers.clusters import need_cluster

WORKFLOWS = Path(__file__).resolve().parent / "workflows"
#: compat/b2luigi-shim: a top-level package ``b2luigi`` that is b2batch (not installed by default).
B2LUIGI_SHIM = Path(__file__).resolve().parents[1] / "compat" / "b2luigi-shim"
#: b2luigi prints a tab before each task; rich (which both b2luigi and the shim use) expands it.
TAB = " " * 8

# A suite started under nohup (or by anything that ignores SIGHUP) would hand the ignored SIGHUP to every workflow
# it starts, which then keeps ignoring it, as a program run with nohup should: the tests of what a run does on
# SIGHUP need it at its default, as a terminal's session has it.
if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The fast tier and the xdist groups (``tests/helpers/tiers.py``), before ``-m`` selects."""
    tiers.apply(items)


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.chdir(tmp_path)
    for var in settings.SETTINGS_ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    # Under pytest, __main__ is pytest itself: lay outputs out in the test's folder instead.
    monkeypatch.setenv(base_folder.BASE_DIR_VARIABLE, str(tmp_path))
    # A settings store of the test's own: no set_setting of another test, no cached files, b2batch's profile (the
    # b2luigi fixture chooses b2luigi's), and b2luigi's one process() per script counted per test.
    with settings.using_store(settings.Store("b2batch")):
        yield tmp_path


def clean_env(**extra: str) -> dict[str, str]:
    """The environment for a workflow subprocess: no settings file or base folder named, unbuffered output,
    ``extra``."""
    env = {k: v for k, v in os.environ.items()
           if k not in settings.SETTINGS_ENV_VARS and k != base_folder.BASE_DIR_VARIABLE}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def peer_env(**extra: str) -> dict[str, str]:
    """:func:`clean_env` for a peer venv's Python (the real b2luigi, joblib-htcondor ...): without PYTHONPATH, which
    may name this checkout or the b2luigi shim and would shadow the real package."""
    env = clean_env(**extra)
    env.pop("PYTHONPATH", None)
    return env


def shim_env() -> dict[str, str]:
    """A workflow's environment with the b2luigi shim (and this checkout of b2batch) importable."""
    root = str(B2LUIGI_SHIM.parents[1])
    path = os.pathsep.join(p for p in (str(B2LUIGI_SHIM), root, os.environ.get("PYTHONPATH", "")) if p)
    return clean_env(PYTHONPATH=path)


@dataclass
class Workflow:
    """A workflow script copied into a test folder."""

    folder: Path
    script: Path

    def command(self, *args: str) -> list[str]:
        return [sys.executable, str(self.script), *args]

    def run(self, *args: str, timeout: float = 120, env: dict[str, str] | None = None,
            input: str | None = None) -> subprocess.CompletedProcess[str]:
        """Run the script with ``args`` in its folder, stdin ``input`` (default: none, as in a batch job);
        stdout and stderr captured as text."""
        stdin = {"input": input} if input is not None else {"stdin": subprocess.DEVNULL}
        return subprocess.run(self.command(*args), check=False, cwd=self.folder, env=env or clean_env(),
                              capture_output=True, text=True, timeout=timeout, **stdin)

    def popen(self, *args: str, **kwargs: object) -> subprocess.Popen[str]:
        return subprocess.Popen(self.command(*args), cwd=self.folder, env=clean_env(), text=True,
                                stdin=subprocess.DEVNULL, **kwargs)  # type: ignore[call-overload]


@pytest.fixture
def workflow(tmp_path: Path):
    """``workflow(script, *modules, folder=None)``: the script of tests/workflows copied into ``folder``
    (default ``tmp_path``) together with the modules it imports from tests/workflows."""

    def copy(script: str, *modules: str, folder: Path | None = None) -> Workflow:
        target = folder or tmp_path
        target.mkdir(parents=True, exist_ok=True)
        for name in (script, *modules):
            shutil.copy(WORKFLOWS / name, target / name)
        return Workflow(folder=target, script=target / script)

    return copy


@pytest.fixture
def weird_tmp_path(tmp_path: Path) -> Path:
    """A folder whose path breaks any unquoted use in a shell."""
    path = tmp_path / "a'; echo foo"
    path.mkdir()
    return path


def tree(folder: Path) -> list[str]:
    """The files below ``folder``, relative and sorted (for readable assertion messages)."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def process_alive(pid: int) -> bool:
    """Whether the process ``pid`` runs (a zombie, or one that ends while it is looked at, does not)."""
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, what: str = "the condition",
             interval: float = 0.02) -> Any:
    """Poll until ``predicate()`` is truthy; its value, or an AssertionError naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


@pytest.fixture
def b2luigi(monkeypatch: pytest.MonkeyPatch):
    """``import b2luigi`` in this process, through the shim; forgotten again after the test."""
    monkeypatch.syspath_prepend(str(B2LUIGI_SHIM))
    module = importlib.import_module("b2luigi")
    settings.use_profile("b2luigi")  # as the first import did (b2luigi stays imported)
    yield module
    for name in [m for m in sys.modules if m == "b2luigi" or m.startswith("b2luigi.")]:
        del sys.modules[name]


@pytest.fixture(scope="module")
def slurm() -> None:
    """The local Slurm must be up; in CI (CI set) its absence fails the tests instead of skipping them."""
    need_cluster("Slurm", "slurm.sh")


@pytest.fixture(scope="module")
def sge() -> None:
    """The local SGE must be up; in CI (CI set) its absence fails the tests instead of skipping them."""
    need_cluster("SGE", "sge.sh")
