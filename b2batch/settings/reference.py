"""The settings, written out for people: ``settings.json.example`` (``b2batch settings``) and the reference table
of the docs (``b2batch settings --markdown``, the docs' build hook)."""

from __future__ import annotations

import json

from b2batch.settings import SETTINGS, default_of, store


def example_settings() -> str:
    """The text of settings.json.example: every declared setting with its default (under the process's
    profile, named first when it is not b2batch's) and meaning."""
    lines = ["{"]
    if store().profile != "b2batch":
        note = f"profile {store().profile}: these defaults are {store().profile} 1.3's where it has the setting"
        lines.append(f'  "_profile": {json.dumps(note)},')
    items = list(SETTINGS.values())
    for i, s in enumerate(items):
        lines.append(f'  "_{s.name}": {json.dumps(s.help)},')
        comma = "," if i < len(items) - 1 else ""
        lines.append(f'  "{s.name}": {json.dumps(default_of(s.name))}{comma}')
    lines.append("}")
    return "\n".join(lines) + "\n"


def settings_reference_markdown() -> str:
    """The settings reference of the docs, as a Markdown table."""
    rows = ["| Setting | Default | Takes | Meaning |", "| --- | --- | --- | --- |"]
    for s in SETTINGS.values():
        takes = s.kind.expects if s.kind is not None else "see the meaning"
        rows.append(f"| `{s.name}` | `{json.dumps(s.default)}` | {takes} | {s.help} |")
    return "\n".join(rows) + "\n"
