"""The job-script templates (``b2batch/jobscript/templates/``), the one shell quoting of values written into them, and
the node-side entry point the job wrapper runs.

It reads no settings: the batch systems render their submit files and array dispatch scripts with it, and
:mod:`b2batch.jobscript.wrapper` (which reads a task's settings and containers) renders the job wrapper with it.
"""

from __future__ import annotations

import functools
import shlex
from pathlib import Path
from typing import Any

#: The node-side entry point every job wrapper runs (with the job's spec).
ENTRY_POINT = Path(__file__).resolve().parent / "entry" / "b2batch_job.py"
#: b2batch's own folder (mounted into containers, so that the entry point finds b2batch there).
PACKAGE_FOLDER = Path(__file__).resolve().parents[1]


def quote(value: Any) -> str:
    """``value`` as one shell word: the only quoting of values written into job scripts."""
    return shlex.quote(str(value))


@functools.cache
def _environment() -> Any:
    """The templates' jinja environment, made at the first render: a process that renders none (a pilot, a
    job's node side, most steering processes: a job wrapper is put together without jinja) does not import
    jinja (~50 ms)."""
    import jinja2

    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("b2batch.jobscript", "templates"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    environment.filters["quote"] = quote
    return environment


def render(template: str, **values: Any) -> str:
    """Render one of b2batch's templates."""
    return _environment().get_template(template).render(**values)
