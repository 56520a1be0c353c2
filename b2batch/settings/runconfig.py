"""The one way a front-end makes a run's configuration: :func:`run_config` reads the settings chain once into
an immutable :class:`~b2batch.engine.config.RunConfig`, which it gives to ``Run(config=...)``.

Every front-end (the luigi workflow, the calls executor under joblib and ``b2batch.Pool``, the farm and the
luigid adapter) builds its run here; what it decides for itself (a ``--batch-system`` flag, a throttle) it
passes as ``overrides``, which go into this run's configuration and nowhere else: the settings store is only
read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from b2batch.jobscript import base_folder
from b2batch.engine.config import SETTING_FIELDS, RunConfig
from b2batch.jobscript import wrapper
from b2batch.settings import get_setting


def run_config(lookup: Callable[[str], Any] | None = None, **overrides: Any) -> RunConfig:
    """The run-level settings as the settings chain has them now (settings files, ``set_setting``, the
    profile's defaults), or as ``lookup(name)`` has them (a front-end's own settings over that chain), with
    ``overrides`` (field name -> value; a None value is no override)."""
    known = (*SETTING_FIELDS, "base_dir", "job_wrapper", "flags")
    unknown = sorted(set(overrides) - set(known))
    if unknown:
        raise TypeError(f"run_config() got unknown fields {', '.join(unknown)}; known: {', '.join(known)}")
    lookup = lookup or get_setting
    values: dict[str, Any] = {name: lookup(name) for name in SETTING_FIELDS}
    values["base_dir"] = base_folder.base_dir()
    values["job_wrapper"] = wrapper.job_wrapper
    values.update({name: value for name, value in overrides.items() if value is not None})
    return RunConfig(**values)
