"""The documentation builds with mkdocs without a warning, its settings table is made from the settings'
declarations, and every page and every flag of the workflow scripts is in it."""

from __future__ import annotations

import html
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import clean_env

from b2batch.luigi_frontend import flags
from b2batch.settings import SETTINGS

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
HOOK = DOCS / "hooks" / "settings_reference.py"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site built with ``mkdocs build --strict`` (warnings are errors)."""
    pytest.importorskip("mkdocs", reason="mkdocs is not installed (pip install -e '.[test]')")
    target = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--clean", "-f",
                           str(ROOT / "mkdocs.yml"), "-d", str(target)], cwd=ROOT,
                          env=clean_env(NO_MKDOCS_2_WARNING="1"), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARNING" not in done.stderr, done.stderr
    return target


def text_of(page: Path) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text()))


def test_docs_build_strictly_with_every_page(site: Path) -> None:
    for page in sorted(DOCS.glob("*.md")):
        built = site / ("index.html" if page.stem == "index" else f"{page.stem}/index.html")
        assert built.is_file(), f"{page.name} was not built"
    assert not (site / "hooks").exists()  # the hook is no page


def test_every_page_is_in_the_navigation() -> None:
    yaml = pytest.importorskip("yaml")
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)

    def pages(nav: object) -> list[str]:
        if isinstance(nav, str):
            return [nav]
        if isinstance(nav, list):
            return [p for item in nav for p in pages(item)]
        if isinstance(nav, dict):
            return [p for value in nav.values() for p in pages(value)]
        return []

    assert sorted(pages(config["nav"])) == sorted(p.name for p in DOCS.glob("*.md"))


def test_settings_page_lists_every_declared_setting(site: Path) -> None:
    text = text_of(site / "settings" / "index.html")
    assert "b2batch: settings table" not in text  # the marker was replaced
    for setting in SETTINGS.values():
        takes = setting.kind.expects if setting.kind is not None else "see the meaning"
        assert re.search(rf"{re.escape(setting.name)}\s+{re.escape(json.dumps(setting.default))}\s+"
                         rf"{re.escape(takes)}\s+{re.escape(setting.help[:40])}", text), setting.name


def test_settings_hook_refuses_a_page_without_its_marker() -> None:
    from mkdocs.exceptions import PluginError

    spec = importlib.util.spec_from_file_location("settings_reference", HOOK)
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)

    class Page:
        class file:
            src_uri = "settings.md"

    with pytest.raises(PluginError, match="must contain the line"):
        hook.on_page_markdown("# Settings\n", Page, None, None)
    table = hook.on_page_markdown(f"# Settings\n\n{hook.MARKER}\n", Page, None, None)
    assert all(f"| `{name}` |" in table for name in SETTINGS)
    Page.file.src_uri = "index.md"
    assert hook.on_page_markdown(hook.MARKER, Page, None, None) == hook.MARKER  # other pages stay as they are


def test_every_flag_of_workflow_scripts_is_documented(site: Path) -> None:
    text = text_of(site / "index.html")
    for action in flags.parser()._actions:
        for flag in action.option_strings:
            assert flag in text, f"{flag} is not in docs/index.md"
    commands = text_of(site / "running" / "index.html")
    for command in ("b2batch run", "b2batch status", "b2batch cancel", "b2batch settings", "b2batch emulate"):
        assert command in commands
