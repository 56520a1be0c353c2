"""The inputs a test (or a notebook, or a program that runs two workflows) gives the settings chain instead of
patching b2batch's modules (issue 41, "Tests"): a settings store of its own (``settings.using_store``) and the
base folder named by ``$B2BATCH_BASE_DIR``. ``set_setting`` stays process-wide (b2luigi's API): every thread
sees the store in use.
"""

from __future__ import annotations

import ast
import threading
from pathlib import Path

import pytest

import b2batch
from b2batch import settings
from b2batch.errors import SettingError
from b2batch.jobscript import base_folder
from b2batch.luigi_frontend import workflow

CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"


def test_a_store_of_its_own_holds_set_setting_files_and_profile_for_its_block(tmp_path: Path) -> None:
    (tmp_path / "settings.json").write_text('{"result_dir": "from_file"}')
    b2batch.set_setting("log_dir", "outer_logs")
    outer = settings.store()
    with settings.using_store(settings.Store("b2luigi")) as inner:
        assert settings.store() is inner and settings.active_profile() == "b2luigi"
        assert b2batch.get_setting("log_dir") == settings.default_of("log_dir")  # the outer set_setting is not here
        assert b2batch.get_setting("result_dir") == "from_file"  # the files are read through the inner store
        b2batch.set_setting("log_dir", "inner_logs")
        seen = []
        thread = threading.Thread(target=lambda: seen.append(b2batch.get_setting("log_dir")))
        thread.start()
        thread.join()
        assert seen == ["inner_logs"]  # process-wide: another thread sees the store in use
    assert settings.store() is outer and settings.active_profile() == "b2batch"
    assert b2batch.get_setting("log_dir") == "outer_logs"


def test_a_store_names_an_unknown_profile() -> None:
    with pytest.raises(SettingError, match="Unknown settings profile 'b2lugi'"):
        settings.Store("b2lugi")


def test_process_once_counts_per_store() -> None:
    b2batch.set_setting("process_once", True)
    workflow._once_per_script()
    with pytest.raises(RuntimeError, match="process\\(\\) was called a second time"):
        workflow._once_per_script()
    with settings.using_store(settings.Store(code={"process_once": True})):
        workflow._once_per_script()  # another script's store: its first call
    assert "process_called" not in settings.settings_snapshot()["code"]


def test_the_base_folder_is_the_named_one_below_a_pinned_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(base_folder.BASE_DIR_VARIABLE, str(tmp_path / "named"))
    assert base_folder.base_dir() == tmp_path / "named" == base_folder.resolve("x").parent
    assert base_folder.given_base_dir() == str(tmp_path / "named") and base_folder.pinned_base_dir() is None
    with base_folder.base_dir_pinned(str(tmp_path / "job")):
        assert base_folder.base_dir() == tmp_path / "job" == Path(base_folder.given_base_dir())
    monkeypatch.delenv(base_folder.BASE_DIR_VARIABLE)
    assert base_folder.given_base_dir() is None and base_folder.base_dir() != tmp_path / "named"


def _b2batch_names(tree: ast.Module) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "b2batch":
            names.update(alias.asname or alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update((a.asname or a.name).split(".")[0] for a in node.names if a.name.split(".")[0] == "b2batch")
    return names


def module_patches(source: str) -> list[str]:
    """The ``setattr``/``monkeypatch.setattr`` calls and assignments of ``source`` that change an attribute of
    a b2batch module (or of a b2batch name it imported)."""
    tree = ast.parse(source)
    names = _b2batch_names(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and (getattr(node.func, "attr", None) == "setattr"
                                           or getattr(node.func, "id", None) == "setattr") and node.args:
            target = node.args[0]
            if (isinstance(target, ast.Name) and target.id in names) or (
                    isinstance(target, ast.Constant) and str(target.value).startswith("b2batch")):
                found.append(f"{node.lineno}: {ast.unparse(node)}")
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id in names:
                    found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_conftest_patches_no_module_of_b2batch() -> None:
    assert module_patches(CONFTEST.read_text()) == [], (
        "tests/conftest.py patches b2batch's modules; give the test its settings through the chain's inputs "
        "(settings.using_store(settings.Store()), $B2BATCH_BASE_DIR, the environment) instead")
    assert module_patches('from b2batch import settings\nmonkeypatch.setattr(settings, "_profile", "x")\n')
    assert module_patches('from b2batch.jobscript import base_folder\nbase_folder._pinned_base_dir = "/x"\n')
    assert not module_patches('import os\nmonkeypatch.setattr(os, "sep", "/")\n')
