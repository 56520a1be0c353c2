"""``b2luigi.core.settings``: b2batch's settings with b2luigi's signatures.

``get_setting`` takes b2luigi's ``deprecated_keys``: former names of the setting, still read but with a
:class:`DeprecatedSettingsWarning`. b2luigi's own renamed settings (``result_path``, ``log_folder``) are
read under their new names by b2batch itself.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from b2batch.settings import DeprecatedSettingsWarning, RENAMED_SETTINGS, clear_setting, find_setting, set_setting
from b2batch.settings import get_setting as _get_setting

__all__ = ["DeprecatedSettingsWarning", "RENAMED_SETTINGS", "clear_setting", "get_setting", "set_setting"]


def get_setting(key: str, default: Any = None, task: Any = None,
                deprecated_keys: Iterable[str] | None = None) -> Any:
    """The setting ``key`` (on ``task``, set in code, or in settings.json), else one of its
    ``deprecated_keys`` (with a warning), else ``default``, else b2batch's default for it; a ``ValueError``
    when there is none."""
    try:
        return find_setting(key, task, former_names=tuple(deprecated_keys or ()))
    except KeyError:
        pass
    if default is not None:
        return default
    return _get_setting(key, task=task)  # b2batch's declared default, or a SettingError (a ValueError)
