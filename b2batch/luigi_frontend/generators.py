"""``ParameterGenerator`` and ``ZippedParameterGenerator``: many parameter sets declared in one dict.

A ``ParameterGenerator`` holds the values of one parameter; several are crossed (every combination). A
``ZippedParameterGenerator`` holds the values of several parameters taken together, position by position.
:func:`expand_parameters` turns a dict of them (and of fixed values) into the keyword arguments of one task
each::

    config = {
        "energy": ParameterGenerator([10, 20]),
        "run": ZippedParameterGenerator(experiment=[1, 2], run=[5, 6]),  # the key is not used
        "tag": "v1",
    }
    tasks = [Simulate(**kwargs) for kwargs in expand_parameters(config)]  # 4 tasks
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from typing import Any

#: Public (``b2batch.PUBLIC_MODULES``): what code outside b2batch (the b2luigi shim, plugins) may import.
__all__ = ["CliUserError", "ParameterGenerator", "ZippedParameterGenerator", "expand_parameters"]


class CliUserError(ValueError):
    """A generator given values it cannot use; also every other wrong input of the shim's ``b2luigi`` command
    (this is ``b2luigi.cli.errors.CliUserError``: its text in a red panel, exit status 2). Here it is also a
    ``ValueError``."""

    exit_code = 2

    @property
    def message(self) -> str:
        return str(self)


class ParameterGenerator:
    """The values of one parameter, to be crossed with the other generators of a config."""

    def __init__(self, values: list[Any]) -> None:
        values = list(values)
        if not values:
            raise CliUserError("ParameterGenerator requires at least one value.")
        self.values = values

    def __iter__(self) -> Iterator[Any]:
        return iter(self.values)

    def __repr__(self) -> str:
        return f"ParameterGenerator({self.values!r})"


class ZippedParameterGenerator:
    """The values of several parameters, taken together position by position (all lists equally long)."""

    def __init__(self, **values: list[Any]) -> None:
        if not values:
            raise CliUserError("ZippedParameterGenerator requires at least one keyword argument.")
        lengths = {name: len(list(v)) for name, v in values.items()}
        if len(set(lengths.values())) > 1:
            raise CliUserError(f"ZippedParameterGenerator: all lists must have the same length, got {lengths}.")
        if not next(iter(lengths.values())):
            raise CliUserError("ZippedParameterGenerator requires non-empty lists.")
        self.pairs = {name: list(v) for name, v in values.items()}

    def __iter__(self) -> Iterator[dict[str, Any]]:
        names = list(self.pairs)
        for combination in zip(*self.pairs.values()):
            yield dict(zip(names, combination))

    def __repr__(self) -> str:
        return f"ZippedParameterGenerator(**{self.pairs!r})"


def expand_parameters(config: Mapping[str, Any] | ZippedParameterGenerator) -> list[dict[str, Any]]:
    """Every combination of the config's generators, with its fixed values, as keyword-argument dicts."""
    if isinstance(config, ZippedParameterGenerator):
        return list(config)
    fixed: dict[str, Any] = {}
    axes: list[list[dict[str, Any]]] = []
    for name, value in config.items():
        if isinstance(value, ParameterGenerator):
            axes.append([{name: v} for v in value])
        elif isinstance(value, ZippedParameterGenerator):
            axes.append(list(value))
        else:
            fixed[name] = value
    expanded = []
    for combination in itertools.product(*axes):
        kwargs = dict(fixed)
        for part in combination:
            kwargs.update(part)
        expanded.append(kwargs)
    return expanded
