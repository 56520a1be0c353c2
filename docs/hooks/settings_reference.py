"""mkdocs hook: the settings table of ``settings.md`` is made at build time from ``b2batch.settings.SETTINGS``,
the one place where settings are declared, so the page cannot fall behind the code."""

from __future__ import annotations

import warnings
from typing import Any

from mkdocs.exceptions import PluginError

#: Where the table goes in settings.md.
MARKER = "<!-- b2batch: settings table -->"
PAGE = "settings.md"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if page.file.src_uri != PAGE:
        return markdown
    if MARKER not in markdown:
        raise PluginError(f"docs/{PAGE} must contain the line {MARKER!r}: the settings table is put there.")
    with warnings.catch_warnings():  # importing luigi warns of its own deprecations
        warnings.simplefilter("ignore", DeprecationWarning)
        from b2batch.settings.reference import settings_reference_markdown

    return markdown.replace(MARKER, settings_reference_markdown().rstrip("\n"))
