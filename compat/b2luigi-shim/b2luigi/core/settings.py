"""``b2luigi.core.settings``: b2batch's settings with b2luigi's signatures and answers.

``get_setting(key, default=None, task=None, deprecated_keys=None)`` looks the setting up as b2luigi does:
on the task, set in code, in settings.json files (read again when they change), then under each of
``deprecated_keys`` (with a :class:`DeprecatedSettingsWarning`), else ``default``; with no ``default``
(b2luigi's ``None``) and no value it raises a :class:`SettingError`, which is also b2luigi's ``ValueError``.
b2luigi's own renamed settings (``result_path``, ``log_folder``) are read under their new names.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from b2batch import SettingError, clear_setting, set_setting
from b2batch.settings import (SETTINGS_ENV_VARS, DeprecatedSettingsWarning, RENAMED_SETTINGS, find_setting,
                              fresh_code_settings, profiled_error, settings_files)

__all__ = ["DeprecatedSettingsWarning", "RENAMED_SETTINGS", "clear_setting", "get_setting", "set_setting",
           "with_new_settings"]

#: b2luigi's ``with_new_settings()``: a block in which no setting is set in code, those of before back after it.
with_new_settings = fresh_code_settings

#: b2luigi's marker for "no value": a default that no setting can have (b2luigi's code passes it as
#: ``get_setting(key, _no_value)`` and compares the answer with ``is``).
_no_value: Any = object()


def get_setting(key: str, default: Any = None, task: Any = None,
                deprecated_keys: Iterable[str] | None = None) -> Any:
    """The setting ``key`` (on ``task``, set in code, or in settings.json), else one of its
    ``deprecated_keys`` (with a warning), else ``default``; a :class:`SettingError` (a ``ValueError``) when
    there is none and ``default`` is ``None``, as in b2luigi."""
    if isinstance(deprecated_keys, str):
        deprecated_keys = [deprecated_keys]
    try:
        return find_setting(key, task, former_names=tuple(deprecated_keys or ()))
    except KeyError:
        pass
    if default is not None:
        return default
    owner = f" for task {task}" if task is not None else ""
    former = f" (nor under its former names {', '.join(map(repr, deprecated_keys))})" if deprecated_keys else ""
    raise profiled_error(SettingError)(
        f"b2luigi.get_setting: no value for the setting {key!r}{owner}{former}, and no default was given. Set it "
        f"as an attribute of the task, with b2luigi.set_setting({key!r}, ...), or in a settings.json in the "
        f"working directory or a parent (or the file named by ${SETTINGS_ENV_VARS[1]}), or pass "
        f"get_setting({key!r}, default=...).")


def _setting_file_iterator() -> Iterator[str]:
    """The settings.json files that settings are read from, nearest (winning) first; a file named by
    ``$B2LUIGI_SETTINGS_JSON`` (or ``$B2BATCH_SETTINGS``) as it is named, whether or not it exists."""
    yield from settings_files()
