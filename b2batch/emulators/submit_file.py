"""HTCondor submit description files: parsing, macro expansion and argument/environment quoting.

Supported: ``key = value`` commands (keys case-insensitive, later ones win), ``+Attr = value`` and
``MY.Attr = value`` custom attributes, ``#`` comments, ``\\`` line continuations, ``$(macro)``,
``$(macro:default)`` and ``$ENV(NAME)`` expansion (``Process``/``ProcId``, ``Cluster``/``ClusterId``,
``Step``, ``Item``, ``Row`` and any submit command), and ``queue``, ``queue N``,
``queue [N] VAR in (a b c)``. Each ``queue`` statement uses the commands seen before it.

Quoting follows the condor_submit manual:

>>> split_arguments('"one ""two"" \\'spacey \\'\\'quoted\\'\\' argument\\'"')
['one', '"two"', "spacey 'quoted' argument"]
>>> split_arguments('3 simple arguments')
['3', 'simple', 'arguments']
>>> split_environment('"A=1 B=\\'x y\\'"')
{'A': '1', 'B': 'x y'}
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

_MACRO = re.compile(r"\$(ENV)?\(([A-Za-z0-9_.]+)(?::([^)]*))?\)", re.IGNORECASE)
_QUEUE = re.compile(r"^queue\b(.*)$", re.IGNORECASE | re.DOTALL)
_QUEUE_ARGS = re.compile(
    r"^\s*(?P<count>\d+)?\s*(?:(?P<vars>[A-Za-z_][\w,\s]*?)\s+in\s*\((?P<items>.*)\))?\s*$",
    re.IGNORECASE | re.DOTALL,
)


class SubmitError(ValueError):
    """A submit description that condor_submit would reject; ``str()`` is the tool's message."""


@dataclass
class QueueStatement:
    """One ``queue`` statement with the commands in force when it was read."""

    count: int
    variables: list[str]
    items: list[str]
    commands: dict[str, str]
    custom: dict[str, str]


@dataclass
class SubmitDescription:
    """A parsed submit description: its queue statements (each with its own command snapshot)."""

    queues: list[QueueStatement] = field(default_factory=list)

    def procs(self, cluster: int, extra: dict[str, str] | None = None) -> list[ProcDescription]:
        """Expand every queue statement into fully macro-expanded proc descriptions."""
        result: list[ProcDescription] = []
        for statement in self.queues:
            items = statement.items or [""]
            for row, item in enumerate(items):
                values = item.split(",") if len(statement.variables) > 1 else [item]
                for step in range(statement.count):
                    macros = dict(statement.commands)
                    macros.update({k.lower(): v for k, v in (extra or {}).items()})
                    proc = len(result)
                    macros.update(
                        {
                            "process": str(proc),
                            "procid": str(proc),
                            "cluster": str(cluster),
                            "clusterid": str(cluster),
                            "step": str(step),
                            "row": str(row),
                            "item": item,
                        }
                    )
                    for name, value in zip(statement.variables, values):
                        macros[name.lower()] = value.strip()
                    commands = {key: expand(value, macros) for key, value in macros.items()}
                    custom = {key: expand(value, macros) for key, value in statement.custom.items()}
                    result.append(ProcDescription(proc, commands, custom))
        return result


@dataclass
class ProcDescription:
    """The expanded commands of one proc (job) of a cluster."""

    proc: int
    commands: dict[str, str]
    custom: dict[str, str]

    def get(self, *keys: str, default: str = "") -> str:
        """The first non-empty value among synonym commands (e.g. ``batch_name``, ``jobbatchname``)."""
        for key in keys:
            value = self.commands.get(key.lower(), "").strip()
            if value:
                return value
        return default


def expand(value: str, macros: dict[str, str], depth: int = 0) -> str:
    """Expand ``$(name)``, ``$(name:default)`` and ``$ENV(NAME)``; undefined macros become empty."""
    if depth > 20 or "$" not in value:
        return value

    def replace(match: re.Match[str]) -> str:
        env, name, default = match.group(1), match.group(2), match.group(3)
        if env:
            return os.environ.get(name, default or "")
        found = macros.get(name.lower())
        if found is None:
            return default or ""
        return expand(found, macros, depth + 1)

    return _MACRO.sub(replace, value)


def parse(text: str) -> SubmitDescription:
    """Parse a submit description; raises :class:`SubmitError` with condor_submit's wording."""
    description = SubmitDescription()
    commands: dict[str, str] = {}
    custom: dict[str, str] = {}
    lines = text.splitlines()
    number = 0
    while number < len(lines):
        start = number + 1
        line = lines[number].strip()
        number += 1
        while line.endswith("\\") and number < len(lines):
            line = line[:-1] + " " + lines[number].strip()
            number += 1
        if not line or line.startswith("#"):
            continue
        queue = _QUEUE.match(line)
        if queue and "=" not in line.split("(")[0]:
            while "(" in line and ")" not in line and number < len(lines):
                line += "\n" + lines[number].strip()
                number += 1
            queue = _QUEUE.match(line)
            assert queue is not None
            description.queues.append(_queue_statement(queue.group(1), commands, custom, start))
            continue
        if "=" not in line:
            raise SubmitError(
                f"ERROR: on Line {start} of submit file: \nERROR: Failed to parse command file (line {start})."
            )
        key, value = (part.strip() for part in line.split("=", 1))
        if key.startswith("+"):
            custom[key[1:]] = value
        elif key.lower().startswith("my."):
            custom[key[3:]] = value
        elif not re.fullmatch(r"[A-Za-z_][\w.]*", key):
            raise SubmitError(
                f"ERROR: on Line {start} of submit file: \nERROR: Failed to parse command file (line {start})."
            )
        else:
            commands[key.lower()] = value
    if not description.queues:
        raise SubmitError('ERROR: "submit" doesn\'t contain any "queue" commands -- no jobs queued')
    return description


def _queue_statement(args: str, commands: dict[str, str], custom: dict[str, str], line: int) -> QueueStatement:
    match = _QUEUE_ARGS.match(expand(args, dict(commands)))
    if not match:
        raise SubmitError(f"ERROR: on Line {line} of submit file: \nERROR: Unsupported queue statement: queue{args}")
    count = int(match.group("count")) if match.group("count") else 1
    variables = [v.strip() for v in (match.group("vars") or "").split(",") if v.strip()]
    items: list[str] = []
    items_text = match.group("items")
    if items_text is not None:
        if len(variables) <= 1:
            items = [item for item in re.split(r"[\s,]+", items_text.strip()) if item]
        else:
            items = [row.strip() for row in items_text.splitlines() if row.strip()]
    return QueueStatement(count, variables or ["item"], items, dict(commands), dict(custom))


def _tokens(inner: str, what: str) -> list[str]:
    """Split new-syntax text: whitespace separates, '...' groups, '' and \"\" are literal quotes."""
    result: list[str] = []
    current: list[str] = []
    started = quoted = False
    index = 0
    while index < len(inner):
        char = inner[index]
        nxt = inner[index + 1] if index + 1 < len(inner) else ""
        if char == '"':
            if nxt != '"':
                raise SubmitError(f"ERROR: {what} string has an unescaped double quote: {inner!r}")
            current.append('"')
            started = True
            index += 2
            continue
        if char == "'":
            if quoted and nxt == "'":
                current.append("'")
                index += 2
                continue
            quoted = not quoted
            started = True
        elif char in " \t" and not quoted:
            if started:
                result.append("".join(current))
            current, started = [], False
        else:
            current.append(char)
            started = True
        index += 1
    if quoted:
        raise SubmitError(f"ERROR: {what} string ends inside a single-quoted section: {inner!r}")
    if started:
        result.append("".join(current))
    return result


def split_arguments(value: str) -> list[str]:
    """The argv tail given by an ``arguments`` command, in new (double-quoted) or old syntax."""
    value = value.strip()
    if value.startswith('"'):
        if len(value) < 2 or not value.endswith('"'):
            raise SubmitError(f"ERROR: Arguments string does not end with a double quote: {value}")
        return _tokens(value[1:-1], "Arguments")
    return [part.replace('\\"', '"') for part in value.split()]


def split_environment(value: str) -> dict[str, str]:
    """The variables set by an ``environment`` command, in new (double-quoted) or old (``;``) syntax."""
    value = value.strip()
    if value.startswith('"'):
        if len(value) < 2 or not value.endswith('"'):
            raise SubmitError(f"ERROR: Environment string does not end with a double quote: {value}")
        pairs = _tokens(value[1:-1], "Environment")
    else:
        pairs = [part.strip() for part in value.split(";") if part.strip()]
    env: dict[str, str] = {}
    for pair in pairs:
        if "=" not in pair:
            raise SubmitError(f"ERROR: Environment entry has no '=': {pair}")
        name, val = pair.split("=", 1)
        env[name] = val
    return env


_UNITS = {"K": 1.0, "M": 1024.0, "G": 1024.0**2, "T": 1024.0**3}


def size_kb(value: str, default_unit: str, command: str) -> float:
    """A size with an optional K/M/G/T suffix (B optional) in KiB; bare numbers are in ``default_unit``."""
    match = re.fullmatch(r"\s*([\d.]+)\s*([KMGT]?)B?\s*", value, re.IGNORECASE)
    if not match:
        raise SubmitError(f"ERROR: {command} = {value} is not a valid size")
    return float(match.group(1)) * _UNITS[(match.group(2) or default_unit).upper()]


def memory_mb(value: str) -> int:
    """``request_memory`` in MB (bare numbers are MB)."""
    return max(1, round(size_kb(value, "M", "request_memory") / 1024))


def disk_kb(value: str) -> int:
    """``request_disk`` in KB (bare numbers are KB)."""
    return max(1, round(size_kb(value, "K", "request_disk")))
