"""The settings hierarchy: one ordered chain of sources, first value wins.

A setting is looked up in this order:

1. the task's own attribute, property or zero-argument method of that name;
2. values set in code with :func:`set_setting`;
3. ``settings.json`` files: the file named by ``$B2BATCH_SETTINGS`` (or b2luigi's
   ``$B2LUIGI_SETTINGS_JSON``) if set, else every ``settings.json`` from the working directory up to the
   root, the nearest one winning, then those from the workflow script's folder up to the root (so a
   script finds the settings.json beside it wherever it is started from);
4. the ``default`` passed to :func:`get_setting`;
5. the default of the process's profile (:data:`PROFILES`): a workflow written against b2luigi (one that
   imported ``b2luigi`` through the shim) gets b2luigi 1.3's defaults;
6. the default declared in :data:`SETTINGS`.

Sources 2, 3 and the profile of 5 are those of the settings store in use (:class:`Store`): one per process
(``set_setting`` is process-wide, as in b2luigi), another inside ``with using_store(Store()):``.

Every setting b2batch knows is declared once, in :data:`SETTINGS`; ``settings.json.example`` and the docs'
settings reference are generated from it (``python -m b2batch.settings --example``).
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import stat
import sys
import time
import warnings
from pathlib import Path
from collections.abc import Iterable, Iterator
from typing import Any

from b2batch.errors import SettingError
from b2batch.settings.declared import (DICT, Computed, FLAG, FOLDER, LIST, PATH, PROFILES, RENAMED_SETTINGS,  # noqa: F401
                                      SECONDS, SETTINGS, TEXT, DeprecatedSettingsWarning, Kind, Setting)
from b2batch.settings.typos import (TYPO_CUTOFF, closest_name, misspelt_setting_error,  # noqa: F401
                                    misspelt_settings, unknown_setting_message)

logger = logging.getLogger(__name__)

#: Public (``b2batch.PUBLIC_MODULES``): what code outside b2batch (the b2luigi shim, plugins) may import.
__all__ = ["DeprecatedSettingsWarning", "RENAMED_SETTINGS", "SETTINGS_ENV_VARS", "SETTINGS_FILE_NAME", "Store", "active_profile", "clear_setting", "find_setting", "fresh_code_settings", "get_setting", "profiled_error", "set_setting", "settings_files", "settings_snapshot", "store", "use_profile", "using_store"]

SETTINGS_ENV_VARS = ("B2BATCH_SETTINGS", "B2LUIGI_SETTINGS_JSON")
SETTINGS_FILE_NAME = "settings.json"
_NOT_SET: Any = object()
_monotonic = time.monotonic  # the clock of the settings files' checks (tests move it on)


def use_profile(name: str) -> None:
    """Choose the defaults layer (:data:`PROFILES`) of the settings store in use; importing ``b2luigi`` (the shim)
    chooses ``b2luigi``. Settings given anywhere else still win."""
    if name not in PROFILES:
        raise SettingError(f"Unknown settings profile {name!r}; the profiles are {', '.join(PROFILES)}.")
    _store.profile = name


def active_profile() -> str:
    """The name of the defaults layer of the settings store in use (see :func:`use_profile`)."""
    return _store.profile


#: Profiles whose errors for bad input carry the name of the builtin exception their tool raises.
_BUILTIN_NAMED_ERRORS = {"b2luigi"}


@functools.cache
def _builtin_named(error_class: type[Exception]) -> type[Exception]:
    builtin = next(c for c in error_class.__mro__ if c.__module__ == "builtins" and c not in (Exception, BaseException,
                                                                                              object))
    return type(builtin.__name__, (error_class,), {"__module__": "builtins", "__qualname__": builtin.__name__,
                                                     "__doc__": f"{error_class.__name__}, under b2luigi's name."})


def profiled_error(error_class: type[Exception]) -> type[Exception]:
    """The class to raise for b2batch's ``error_class`` (e.g. :class:`SettingError`) under the process's
    profile: itself, or under the b2luigi profile a subclass of it that is named and printed as the builtin
    exception b2luigi raises there (``ValueError``): ``except ValueError``, ``except SettingError`` and
    ``type(error).__name__`` all see what they expect, and the message stays b2batch's."""
    return _builtin_named(error_class) if _store.profile in _BUILTIN_NAMED_ERRORS else error_class


def default_of(key: str) -> Any:
    """The default of the declared setting ``key`` under the process's profile."""
    layer = PROFILES[_store.profile]
    if key not in layer:
        return SETTINGS[key].default
    value = layer[key]
    return value.make() if isinstance(value, Computed) else value


_FORMER_NAMES = {new: tuple(o for o, n in RENAMED_SETTINGS.items() if n == new) for new in RENAMED_SETTINGS.values()}


class _SettingsFiles:
    """settings.json files found from a folder upward (the working directory's, then, except under the b2luigi
    profile, the workflow script's), parsed once and re-read when they change.

    A lookup stats the settings files there are and the working directory (whose time stamp changes when
    a file is made or removed in it): a file changed, or written into the working directory, while the
    process runs is seen at the next lookup under b2luigi's profile, as b2luigi reads the files at each lookup,
    and within ``CHECK_INTERVAL`` under b2batch's (a new working directory or settings variable at once); every
    place a file may be (one ``stat`` per folder up to the root) is looked at again when the working directory
    changed, and at least once a second. The files are parsed again only when one's mtime or size changed (or
    one appeared or went away)."""

    RESCAN_INTERVAL = 1.0  # seconds between looks at every place (files made in folders above the working one)
    #: Under b2batch's profile, seconds in which a lookup in the same working directory and environment takes
    #: the files as they were (no stat): a run asks dozens of settings per task. b2luigi's profile looks at
    #: every lookup, as b2luigi reads the files at each.
    CHECK_INTERVAL = 0.5

    def __init__(self) -> None:
        self._key: tuple[Any, ...] | None = None
        self._places: tuple[str, ...] = ()
        self._stamps: tuple[tuple[int, int, int], ...] = ()
        self._present: tuple[tuple[str, tuple[int, int, int]], ...] = ()  # the files there are, with stamps
        self._folder_stamp: tuple[int, int, int] | None = None
        self._scanned_at = 0.0
        self._checked_at = float("-inf")
        self._merged: dict[str, Any] = {}
        self.pinned: list[str] | None = None  # set in jobs: the files the steering process used

    def _candidates(self) -> tuple[str, ...]:
        if self.pinned is not None:
            return tuple(self.pinned)
        for var in SETTINGS_ENV_VARS:
            if os.environ.get(var):
                return (os.environ[var],)
        here = Path.cwd()
        folders = [here, *here.parents]
        script = getattr(sys.modules.get("__main__"), "__file__", None)
        # then (not under b2luigi's profile: b2luigi reads the working directory's only) the workflow script's
        # folder and its parents, so that it runs from anywhere
        if script and _store.profile != "b2luigi":
            there = Path(os.path.abspath(script)).parent
            folders += [p for p in (there, *there.parents) if p not in folders]
        return tuple(str(p / SETTINGS_FILE_NAME) for p in folders)

    def _named(self) -> bool:
        """Whether the files are named (by the steering process or an environment variable), not searched."""
        return self.pinned is not None or any(os.environ.get(var) for var in SETTINGS_ENV_VARS)

    def _locate(self) -> list[Path]:
        return [Path(f) for f in self._candidates() if os.path.isfile(f)]

    def get(self) -> dict[str, Any]:
        cwd = os.getcwd()
        main = sys.modules.get("__main__")
        key = (cwd, _environment_key(), self.pinned is None, getattr(main, "__file__", None) if main else None,
               _store.profile)
        now = _monotonic()
        if now - self._checked_at < self.CHECK_INTERVAL and key == self._key and _store.profile != "b2luigi":
            return self._merged
        self._checked_at = now
        folder = _stamp(cwd)
        if (key == self._key and folder == self._folder_stamp and now - self._scanned_at < self.RESCAN_INTERVAL
                and all(_stamp(place) == stamp for place, stamp in self._present)):
            return self._merged  # nothing changed: one stat of the working directory and one per file
        if key != self._key:
            self._places = self._candidates()
        stamps = tuple(_stamp(place) for place in self._places)
        if key != self._key or stamps != self._stamps:
            merged: dict[str, Any] = {}
            for place, stamp in reversed(list(zip(self._places, stamps))):  # nearest file last, so it wins
                if (stamp[0] >= 0 and stat.S_ISREG(stamp[2])) or self._named():  # a named file must be there
                    merged.update(_read_settings_file(Path(place)))
            self._key, self._stamps, self._merged = key, stamps, merged
        self._present = tuple((place, stamp) for place, stamp in zip(self._places, stamps) if stamp[0] >= 0)
        self._folder_stamp, self._scanned_at = folder, now
        return self._merged

    def files(self) -> list[Path]:
        return self._locate()


_ENCODED_ENV_VARS = tuple(os.fsencode(v) for v in SETTINGS_ENV_VARS)


def _environment_key() -> tuple[Any, ...]:
    """The values of the settings-file variables: looked up thousands of times a second while tasks are handed
    out, so read from os.environ's bytes mapping where CPython has one (os.environ.get encodes every key)."""
    data = getattr(os.environ, "_data", None)
    if isinstance(data, dict):
        return tuple(map(data.get, _ENCODED_ENV_VARS))
    return tuple(os.environ.get(v) for v in SETTINGS_ENV_VARS)


def _stamp(path: str) -> tuple[int, int, int]:
    """The mtime, size and mode of the file at ``path``; (-1, -1, 0) when there is none."""
    try:
        st = os.stat(path)
    except OSError:
        return (-1, -1, 0)
    return (st.st_mtime_ns, st.st_size, st.st_mode)


def _read_settings_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
    except OSError as e:
        if _store.profile in _BUILTIN_NAMED_ERRORS:
            raise  # b2luigi's error there: open()'s own (FileNotFoundError, PermissionError), nothing chained
        raise SettingError(f"Cannot read the settings file {path}: {e}. Fix its permissions, or unset "
                           f"{'/'.join(SETTINGS_ENV_VARS)} if it names a file that is not there.") from e
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise SettingError(f"The settings file {path} is not valid JSON: {e.msg} at line {e.lineno}, column "
                           f"{e.colno}. Fix the file (settings.json.example shows every setting).") from e
    if not isinstance(data, dict):
        raise SettingError(f"The settings file {path} must hold one JSON object of setting names to values, "
                           f"not {type(data).__name__}.")
    # "_x" names are comments
    check_setting_names([name for name in data if not name.startswith("_")], f"the settings file {path}")
    return data


def check_setting_names(names: Iterable[str], where: str, known: Iterable[str] | None = None,
                        what: str = "setting") -> None:
    """Check names given as settings (or a front-end's options) in the place ``where`` (e.g. "the settings file
    /x/settings.json", "set_setting()", "the joblib backend b2batch"). A name close to a known one (a likely
    typo: ``batch_sytem``) raises :class:`SettingError` with one line naming the place, the name, the name
    meant and the known names, so that the run stops before anything is submitted; any other unknown name
    (e.g. a user's own setting read with get_setting) gets one short warning line. ``known``: the names the
    front-end takes (default: the declared settings and their former names)."""
    names = list(names)
    known_names = sorted({*SETTINGS, *RENAMED_SETTINGS} if known is None else set(known))
    for name in names:
        if name in known_names:
            continue
        meant = closest_name(name, known_names)
        if meant is not None:
            raise SettingError(f"In {where}: {name!r} is not a known {what}. Did you mean {meant!r}? Rename it "
                               f"(known {what}s: {', '.join(known_names)}).")
    if not _store.code.get("unknown_setting_warnings", default_of("unknown_setting_warnings")):
        return  # the b2luigi profile: a workflow's own settings are usual there, and b2luigi says nothing
    for name in names:
        if name not in known_names:
            logger.warning("%s", f"In {where}: {name!r} is not a {what} b2batch knows; it is ignored unless your "
                                 f"code reads it with get_setting().")


class Store:
    """Where a script's settings come from besides its tasks: the values of :func:`set_setting`, the settings
    files (parsed once, re-read when they change), the defaults profile, and whether ``process()`` ran with it
    (b2luigi's rule ``process_once``: one ``process()`` per script).

    A process has one store in use: :func:`set_setting` is process-wide, as b2luigi's API defines it. Code that
    runs a script's settings apart (a test, a notebook cell, a program that runs two workflows one after the
    other) gives :func:`using_store` a store of its own: ``with using_store(Store()): ...``."""

    def __init__(self, profile: str = "b2batch", code: dict[str, Any] | None = None) -> None:
        if profile not in PROFILES:
            raise SettingError(f"Unknown settings profile {profile!r}; the profiles are {', '.join(PROFILES)}.")
        self.profile = profile
        self.code: dict[str, Any] = dict(code or {})
        self.files = _SettingsFiles()
        self.process_called = False


_store = Store()


def store() -> Store:
    """The settings store in use (see :class:`Store`)."""
    return _store


@contextlib.contextmanager
def using_store(new: Store) -> Iterator[Store]:
    """Look settings up in ``new`` inside the ``with`` block (in every thread: the store is the process's), and
    put the store before it back afterwards."""
    global _store
    previous, _store = _store, new
    try:
        yield new
    finally:
        _store = previous


def settings_files() -> list[str]:
    """The settings files that lookups read, nearest (winning) first: the ones named (in a job by the
    steering process, else by ``$B2BATCH_SETTINGS`` or ``$B2LUIGI_SETTINGS_JSON``) as named, whether or not
    they exist; else the ``settings.json`` files there are, from the working directory upward, then (not under
    the b2luigi profile, as b2luigi does not) from the workflow script's folder upward."""
    if _store.files._named():
        return list(_store.files._candidates())
    return [str(path) for path in _store.files.files()]


def set_setting(key: str, value: Any) -> None:
    """Set a setting for all tasks, taking precedence over settings.json and defaults."""
    known = {*SETTINGS, *RENAMED_SETTINGS}
    if key not in known and closest_name(key, known) is None:
        check_setting_names([key], "set_setting()")  # one warning line; a likely typo stops check_settings()
    _store.code[key] = value


def clear_setting(key: str) -> None:
    """Remove a setting set with :func:`set_setting`; nothing happens if it was not set."""
    _store.code.pop(key, None)


@contextlib.contextmanager
def fresh_code_settings() -> Iterator[None]:
    """Inside the block no setting is set in code (settings.json and defaults still apply); after it, those
    set before are back and those set inside are gone (b2luigi's ``with_new_settings``)."""
    saved = dict(_store.code)
    _store.code.clear()
    try:
        yield
    finally:
        _store.code.clear()
        _store.code.update(saved)


def _from_task(task: Any, key: str) -> Any:
    """The setting ``key`` as ``task`` gives it (an attribute, a property or a zero-argument method), else
    ``_NOT_SET``. Under the b2luigi profile a property of the task that raises ``AttributeError`` raises it
    here, as in b2luigi; b2batch's own profile takes it as the task not setting it (a property may raise it to
    leave the setting to the files)."""
    if task is None:
        return _NOT_SET
    value = getattr(task, key, _NOT_SET)
    if value is _NOT_SET:
        if _store.profile == "b2luigi" and (key in getattr(task, "__dict__", ())
                                      or any(key in vars(k) for k in type(task).__mro__)):
            getattr(task, key)  # the task defines it and it raised AttributeError: that error reaches the caller
        return _NOT_SET
    # A zero-argument method of the task computes the setting (e.g. ``def env(self): ...``).
    if callable(value) and getattr(value, "__self__", None) is task:
        value = value()
    return value


def find_setting(key: str, task: Any = None, former_names: tuple[str, ...] = ()) -> Any:
    """The value of ``key`` set on ``task``, in code or in a settings file (no defaults), checked against
    its declared kind; a value found under one of ``former_names`` or of b2luigi's former names of ``key``
    warns with :class:`DeprecatedSettingsWarning`. Raises ``KeyError`` when none is set, and
    :class:`SettingError` (naming the task, the setting, the value, where it was set and what it must be)
    when the value is of the wrong kind."""
    files: dict[str, Any] | None = None  # the settings files, looked at once per lookup and only if needed
    former = _FORMER_NAMES.get(key, ())
    for name in (key, *former_names, *former) if former or former_names else (key,):
        # each source looked at only when the ones before lack the setting
        where, value = 0, _from_task(task, name)
        if value is _NOT_SET:
            where, value = 1, _store.code.get(name, _NOT_SET)
            if value is _NOT_SET:
                if files is None:
                    files = _store.files.get()
                where, value = 2, files.get(name, _NOT_SET)
                if value is _NOT_SET:
                    continue
        if name != key:
            warnings.warn(f"The setting with the name {name} is deprecated. Please use {key} instead. Future "
                          f"versions might remove this setting.", DeprecatedSettingsWarning, stacklevel=3)
        declared = SETTINGS.get(key)
        if declared is None or declared.kind is None:
            return value
        try:
            return declared.kind(value)
        except (ValueError, TypeError, OverflowError):
            raise profiled_error(SettingError)(_wrong_kind(key, name, value, task, where, declared.kind)) from None
    raise KeyError(key)


def _wrong_kind(key: str, name: str, value: Any, task: Any, where: int, kind: Kind) -> str:
    source = [f"as an attribute of task {task}", "with b2batch.set_setting()",
              f"in {', '.join(str(f) for f in _store.files.files()) or 'settings.json'}"][where]
    owner = f"Task {task}: the" if task is not None else "The"
    return (f"{owner} setting {key!r} is {value!r} (set {source}{'' if name == key else f' as {name!r}'}), "
            f"but it must be {kind.expects}. Fix the value there, e.g. {key!r}: "
            f"{json.dumps(default_of(key), default=str)} (its default).")


def get_setting(key: str, default: Any = _NOT_SET, task: Any = None) -> Any:
    """The value of setting ``key`` for ``task`` (or globally), following the chain in this module's doc.

    Raises :class:`SettingError` when no source has a value and no default exists.
    """
    try:
        return find_setting(key, task)
    except KeyError:
        pass
    if default is not _NOT_SET:
        return default
    declared = SETTINGS.get(key)
    if declared is not None and not declared.required:
        return default_of(key)
    owner = f" of task {task}" if task is not None else ""
    raise profiled_error(SettingError)(
        f"No value for the setting {key!r}{owner}. Set it as an attribute of the task, with "
        f"b2batch.set_setting({key!r}, ...), or in a settings.json in the working directory or a parent "
        f"(or the file named by ${SETTINGS_ENV_VARS[0]})."
    )


def check_settings() -> None:
    """Check every setting set in code or in settings files now, so that a misspelt name (see
    :func:`check_setting_names`) or a wrong value stops a run before it starts (task attributes are checked
    when a task's setting is looked up). Raises :class:`SettingError`."""
    _store.files.get()  # the files' names are checked as they are read
    for key in _store.code:
        if key not in SETTINGS and key not in RENAMED_SETTINGS and closest_name(key, {*SETTINGS, *RENAMED_SETTINGS}):
            check_setting_names([key], f"b2batch.set_setting({key!r}, ...)")
    for key in SETTINGS:
        try:
            find_setting(key)
        except KeyError:
            pass


def load_settings_files() -> dict[str, Any]:
    """The merged settings of the settings files, read now: a file that is not valid JSON raises
    :class:`SettingError` here (naming the file and the line) rather than later, from inside luigi."""
    return dict(_store.files.get())


def settings_snapshot() -> dict[str, Any]:
    """The code-set settings and the settings-file path, for handing the same settings to a job."""
    return {"code": dict(_store.code), "files": [str(f) for f in _store.files.files()], "profile": _store.profile}


def use_settings_snapshot(snapshot: dict[str, Any]) -> None:
    """Use the settings of the steering process (see :func:`settings_snapshot`) in a job."""
    use_profile(snapshot.get("profile", _store.profile))
    _store.code.update(snapshot.get("code", {}))
    _store.files.pinned = list(snapshot.get("files", []))
    _store.files._key = None
