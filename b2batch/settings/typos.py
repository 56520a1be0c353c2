"""Misspelt setting names: the known name an unknown one most likely means, and task-class attributes that
look like a misspelt setting (``htcondor_setings``) but are not the task's own."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from b2batch.settings.declared import RENAMED_SETTINGS, SETTINGS


#: How alike (difflib's ratio) an unknown name must be to a known one to count as its misspelling.
TYPO_CUTOFF = 0.8


def closest_name(name: str, known: Iterable[str], cutoff: float = TYPO_CUTOFF) -> str | None:
    """The known name that ``name`` most likely misspells, or None when none is that close."""
    import difflib  # (only for a name that is not known)

    close = difflib.get_close_matches(name, list(known), n=1, cutoff=cutoff)
    return close[0] if close else None


def unknown_setting_message(name: str, where: str, known: Iterable[str] | None = None, what: str = "setting") -> str:
    """One line for an unknown setting (or option) name: where it was given, the closest known name, and the
    known names (``known``: a front-end's own list; default: the declared settings)."""
    names = sorted(SETTINGS) if known is None else sorted(set(known))
    close = closest_name(name, names, cutoff=0.6)
    hint = f" Did you mean {close!r}?" if close else ""
    return f"Unknown {what} {name!r} {where}.{hint} Known {what}s: {', '.join(names)}."


def _code_uses(klass: type, name: str) -> bool:
    """Whether code of ``klass`` (its functions, properties, nested functions) reads or writes ``name`` as an
    attribute or variable: then an attribute of that name is the task's own, not a misspelt setting."""
    stack = []
    for value in vars(klass).values():
        value = getattr(value, "__func__", value)  # classmethod, staticmethod
        if isinstance(value, property):
            stack += [f.__code__ for f in (value.fget, value.fset, value.fdel) if hasattr(f, "__code__")]
        elif hasattr(value, "__code__"):
            stack.append(value.__code__)
    while stack:
        code = stack.pop()
        if name in code.co_names or name in code.co_varnames:
            return True
        stack += [c for c in code.co_consts if hasattr(c, "co_names")]
    return False


def _takes_arguments(value: Any) -> bool:
    """Whether ``value`` is a function that takes arguments besides ``self``: a method, never a setting (a
    setting may be a zero-argument method)."""
    import inspect

    function = getattr(value, "__func__", value)
    if not inspect.isfunction(function):
        return False
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return False
    if not isinstance(value, staticmethod):
        parameters = parameters[1:]
    return any(p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
               for p in parameters)


#: Modules whose classes' attributes are the framework's own, never a user's misspelt setting.
_FRAMEWORK_MODULES = ("luigi", "b2batch", "b2luigi")


def misspelt_settings(cls: type, stop: tuple[type, ...] = (),
                      own: Callable[[str, Any], bool] | None = None) -> list[tuple[str, str]]:
    """Attributes of the task class ``cls`` (and its user-written bases; not ``stop`` and what comes after it,
    nor classes of luigi, b2batch or b2luigi) that look like a misspelt setting (``htcondor_setings``), as
    (attribute, setting meant). Not counted: names close to no setting, names the class's own code uses
    (``self.queues`` in ``run()``), methods that take arguments, and attributes ``own(name, value)`` says are
    the task's (e.g. luigi parameters)."""
    found: dict[str, str] = {}
    classes = []
    for klass in cls.__mro__:
        if klass in stop or klass is object:
            break
        if klass.__module__.split(".")[0] not in _FRAMEWORK_MODULES:
            classes.append(klass)
    for klass in classes:
        for name, value in vars(klass).items():
            if name.startswith("_") or name in SETTINGS or name in RENAMED_SETTINGS or name in found:
                continue
            meant = closest_name(name, SETTINGS, cutoff=0.85)
            if meant is None or (own is not None and own(name, value)) or _takes_arguments(value):
                continue
            if any(_code_uses(k, name) for k in classes):
                continue
            found[name] = meant
    return list(found.items())


def misspelt_setting_error(cls: type, name: str, meant: str) -> str:
    """The one line that stops a run whose task class ``cls`` has the attribute ``name`` for the setting ``meant``."""
    return (f"Task class {cls.__name__}: the attribute {name!r} is not a setting b2batch knows. Did you mean "
            f"{meant!r}? Rename it (or, if it is the task's own value, give it a name further from the settings: "
            f"{', '.join(sorted(SETTINGS))}).")
