"""Named definitions in INI files: runners and task-list handlers that users add without code changes.

A file holds sections; a section that names a class under a key (``Runner`` or ``TaskList``) defines one
thing of that kind, and its other keys are keyword arguments of the class (as strings)::

    [apptainer-el9]
    Runner = b2batch.farm.runners.ContainerRunner
    engine = apptainer
    image = /cvmfs/unpacked.cern.ch/.../el9:latest
    setup = source /opt/setup.sh
    tempdir = True

PyTaskFarmer reads the same format (``~/.pytaskfarmer/runners.d``); its class names are understood too.
"""

from __future__ import annotations

import configparser
import importlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from b2batch.errors import B2BatchError

logger = logging.getLogger(__name__)


class FarmError(B2BatchError):
    """A farm cannot start or go on: the message names what is wrong and how to fix it."""


@dataclass
class Definition:
    """One section of an INI file that defines a runner or a task-list handler."""

    name: str
    reference: str
    kwargs: dict[str, str] = field(default_factory=dict)
    origin: str = ""

    def load_class(self, aliases: dict[str, str] | None = None) -> Any:
        """The class the definition names (``module.Class``); a FarmError naming the file when it cannot be
        imported."""
        reference = (aliases or {}).get(self.reference, self.reference)
        module, _, name = reference.rpartition(".")
        if not module:
            raise FarmError(f"{self.origin}: [{self.name}] names {self.reference!r}, which is not of the form "
                            f"module.Class (e.g. b2batch.farm.runners.ContainerRunner).")
        try:
            return getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError) as e:
            raise FarmError(f"{self.origin}: [{self.name}] names {self.reference!r}, which cannot be loaded "
                            f"({e}). Install the module or fix the name; PYTHONPATH must reach it.") from e


def read_definitions(paths: Iterable[Path], key: str, strict: bool = True) -> dict[str, Definition]:
    """The definitions of ``key`` (``Runner``, ``TaskList``) in the ``*.ini`` files ``paths``, later files
    winning. With ``strict``, a file that is not valid INI is a FarmError; else it is skipped with a
    warning (e.g. an unrelated ``tox.ini`` in the working directory)."""
    found: dict[str, Definition] = {}
    for path in paths:
        parser = configparser.ConfigParser(interpolation=None)
        parser.optionxform = str  # type: ignore[assignment,method-assign]  # keyword arguments keep their case
        try:
            with open(path, encoding="utf-8") as f:
                parser.read_file(f)
        except (OSError, UnicodeDecodeError, configparser.Error) as e:
            if strict:
                raise FarmError(f"Cannot read the {key} definitions in {path}: {e}. Fix the file (INI: "
                                f"[name], then '{key} = module.Class' and 'key = value' lines) or remove "
                                f"it.") from e
            logger.warning("Skipping %s: not a valid INI file (%s)", path, e)
            continue
        for section in parser.sections():
            values = dict(parser[section])
            reference = values.pop(key, None)
            if reference is None:
                continue  # a section of another kind
            found[section] = Definition(section, reference.strip(), values, str(path))
    return found


def ini_files(folders: Iterable[Path]) -> list[Path]:
    """The ``*.ini`` files of ``folders`` that exist, in order, each folder's sorted by name."""
    files: list[Path] = []
    for folder in folders:
        if folder.is_dir():
            files.extend(sorted(folder.glob("*.ini")))
    return files


def user_folders(kind: str) -> list[Path]:
    """Where users define ``kind`` (``runners.d`` or ``tasklists.d``): PyTaskFarmer's folder first, so that
    b2batch's own wins for a name defined in both."""
    home = Path.home()
    return [home / ".pytaskfarmer" / kind, home / ".b2batch" / kind]


def as_bool(value: Any) -> bool:
    """An INI value as a boolean (``True``, ``yes``, ``1``, ``on``; PyTaskFarmer accepts only ``True``)."""
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("true", "yes", "1", "on")
