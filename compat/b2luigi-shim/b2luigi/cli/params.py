"""Task parameters on b2luigi's command line: ``--param key=value`` (values read as JSON when they are),
the ``config`` dict of ``parameters.py`` with its generators expanded, and the check that each given
parameter belongs to a task the command addresses (an unknown ``--param`` is an error when a task was named or
the command removes files, a warning on stderr otherwise)."""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterable
from typing import Any

from rich.text import Text

from b2luigi.cli import output
from b2luigi.cli.errors import CliUserError, suggest  # noqa: F401  (suggest: a name of this module)
from b2luigi.cli.loading import import_from_file
from b2batch import ParameterGenerator, ZippedParameterGenerator

__all__ = ["check_param_applicability", "expand_parameters", "load_parameters", "parse_kv_params",
           "partition_params", "split_kv_params", "suggest", "unknown_param_error", "warn_ignored_params"]


def split_kv_params(items: Iterable[str]) -> dict[str, str]:
    """``key=value`` items as a dict of the raw value strings (split at the first ``=``, the key stripped,
    the value kept byte for byte: the batch runner rebuilds tasks from these)."""
    result: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise CliUserError(f"Invalid --param '{item}'. Use key=value.")
        if not key.strip():
            raise CliUserError(f"Invalid --param '{item}'. Key is empty.")
        result[key.strip()] = value
    return result


def parse_kv_params(items: Iterable[str]) -> dict[str, object]:
    """``key=value`` items with each value stripped and read as JSON (numbers, booleans, lists, quoted
    strings); a value that is not JSON stays the string."""
    parsed: dict[str, object] = {}
    for key, value in split_kv_params(items).items():
        text = value.strip()
        try:
            parsed[key] = json.loads(text)
        except ValueError:
            parsed[key] = text
    return parsed


def load_parameters(filename: str = "parameters.py") -> dict[str, Any]:
    """The ``config`` dict of the parameters file in the current directory; ``{}`` when there is no such
    file (it is optional), ``AttributeError`` when it defines no ``config``."""
    if not os.path.exists(os.path.join(os.getcwd(), filename)):
        return {}
    module = import_from_file(filename, "user_parameters")
    if not hasattr(module, "config"):
        raise AttributeError(f"{filename} must define a 'config' variable")
    return module.config


def expand_parameters(config: dict[str, Any]) -> list[dict[str, Any]]:
    """One keyword dict per combination of the config's generators (each ``ParameterGenerator`` and each
    ``ZippedParameterGenerator`` one axis of the product), the plain values in each; ``[config]`` when it has
    no generator."""
    fixed: dict[str, Any] = {}
    axes: list[list[dict[str, Any]]] = []
    for key, value in config.items():
        if isinstance(value, ParameterGenerator):
            axes.append([{key: v} for v in value.values])
        elif isinstance(value, ZippedParameterGenerator):
            names = list(value.pairs)
            axes.append([dict(zip(names, row)) for row in zip(*value.pairs.values())])
        else:
            fixed[key] = value
    if not axes:
        return [fixed]
    combinations = []
    for parts in itertools.product(*axes):
        merged = dict(fixed)
        for part in parts:
            merged.update(part)
        combinations.append(merged)
    return combinations


def partition_params(params: dict[str, Any], accepted: set[str],
                     override_keys: frozenset[str]) -> tuple[dict[str, Any], list[str], list[str]]:
    """``(the accepted params, the sorted other names from the config, the sorted other names from
    --param)``; ``params`` is one expanded combination."""
    kept = {name: value for name, value in params.items() if name in accepted}
    others = [name for name in params if name not in accepted]
    return (kept, sorted(n for n in others if n not in override_keys),
            sorted(n for n in others if n in override_keys))


def unknown_param_error(bad_keys: list[str], accepted: set[str], target: str) -> CliUserError:
    """The error for ``--param`` names that ``target`` does not have, with a suggestion (one name) or the
    list of its parameters."""
    quoted = ", ".join(f"'{key}'" for key in bad_keys)
    message = f"{target} has no {'parameters' if len(bad_keys) > 1 else 'parameter'} {quoted}."
    close = suggest(bad_keys[0], sorted(accepted)) if len(bad_keys) == 1 else None
    if close:
        message += f" Did you mean '{close}'?"
    elif accepted:
        message += f" Available parameters: {', '.join(sorted(accepted))}."
    return CliUserError(message)


def warn_ignored_params(keys: list[str], target: str) -> None:
    """One warning on stderr (never stdout: ``show --paths`` and ``graph --format dot`` are piped) naming
    the parameters left out; plain text, not markup."""
    output.stderr_console.print(Text(f"Warning: ignoring parameters not declared by {target}: "
                                f"{', '.join(keys)}", style="yellow"))


def check_param_applicability(param_dict: dict[str, Any], considered: list[type], override_keys: frozenset[str],
                              named: bool, target: str, strict: bool = False) -> set[str]:
    """The parameter names of the ``considered`` classes. A ``--param`` none of them has is an error when a
    task was ``named`` or the command is ``strict`` (it removes files), else a warning; a config entry none
    of them has gets a warning in those two cases and is silently left out otherwise."""
    accepted: set[str] = set()
    for cls in considered:
        accepted.update(name for name, _param in cls.get_params())
    _kept, from_config, from_overrides = partition_params(param_dict, accepted, override_keys)
    sure = named or strict
    if from_overrides:
        if sure:
            raise unknown_param_error(from_overrides, accepted, target)
        warn_ignored_params(from_overrides, target)
    if from_config and sure:
        warn_ignored_params(from_config, target)
    return accepted
