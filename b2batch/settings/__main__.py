"""``python -m b2batch.settings [--markdown]``: settings.json.example (or the docs' settings table)."""

import sys

from b2batch.settings.reference import example_settings, settings_reference_markdown

if "--markdown" in sys.argv:
    sys.stdout.write(settings_reference_markdown())
else:
    sys.stdout.write(example_settings())
