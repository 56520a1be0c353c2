"""Memory and time escalation: a job killed for memory or time goes again with its request multiplied.

A batch system reads a job's request from its own settings (:class:`Request`, e.g. Slurm's ``--mem`` and
``--time``) and writes an escalated one back in its own syntax; this module only decides: with the run's
``retry_memory_factor`` (or ``retry_time_factor``) set, a job whose end had the cause ``memory`` (``time``)
asks for ``factor`` times what it asked for last, at most ``max_retry_memory`` (``max_retry_time``). A job
that already asked for the most, or asked for nothing b2batch can read, is not escalated: it ends as it would
without the policy.

Values are kept in megabytes and seconds; :func:`megabytes` and :func:`seconds` read the settings' texts.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from b2batch.engine import causes

_UNITS_MB = {"": 1.0, "k": 1 / 1024, "m": 1.0, "g": 1024.0, "t": 1024.0 ** 2, "p": 1024.0 ** 3}
_MEMORY = re.compile(r"\s*([0-9]*\.?[0-9]+)\s*([kmgtp]?)(?:i?b)?\s*", re.I)
_DURATION = re.compile(r"\s*([0-9]*\.?[0-9]+)\s*([smhd]?)\s*", re.I)
_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def megabytes(value: Any, default_unit: str = "m") -> float:
    """A memory size in MB: a number (in ``default_unit``) or a text such as ``2G``, ``500MB``, ``1.5 GiB``."""
    if isinstance(value, bool):
        raise ValueError(f"not a memory size: {value!r}")
    if isinstance(value, (int, float)):
        return float(value) * _UNITS_MB[default_unit]
    found = _MEMORY.fullmatch(str(value))
    if not found:
        raise ValueError(f"not a memory size: {value!r} (e.g. 4G, 4000M, 4000)")
    return float(found.group(1)) * _UNITS_MB[(found.group(2) or default_unit).lower()]


def seconds(value: Any) -> float:
    """A duration in seconds: a number of seconds, ``90m``/``2h``/``1d``, or ``[D-]HH:MM:SS`` / ``MM:SS``."""
    if isinstance(value, bool):
        raise ValueError(f"not a duration: {value!r}")
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value).strip()
    if ":" in text or "-" in text:
        days, _, clock = text.rpartition("-")
        parts = clock.split(":")
        if not days.strip().isdigit() and days or len(parts) > 3 or not all(p.isdigit() for p in parts):
            raise ValueError(f"not a duration: {value!r} (e.g. 3600, 2h, 01:30:00)")
        total = 0
        for part in parts:
            total = total * 60 + int(part)
        if len(parts) == 2 and days:  # D-HH:MM
            total *= 60
        elif len(parts) == 1 and days:  # D-HH
            total *= 3600
        return float(total + int(days or 0) * 86400)
    found = _DURATION.fullmatch(text)
    if not found:
        raise ValueError(f"not a duration: {value!r} (e.g. 3600, 2h, 01:30:00)")
    return float(found.group(1)) * _SECONDS[found.group(2).lower()]


@dataclass(frozen=True)
class Request:
    """What a job asks its batch system for: memory in MB and run time in seconds (None: not asked)."""

    memory_mb: float | None = None
    time_s: float | None = None

    def merged(self, other: Request | None) -> Request:
        """This request with what ``other`` asks for instead (None fields keep this one's)."""
        if other is None:
            return self
        return Request(other.memory_mb if other.memory_mb is not None else self.memory_mb,
                       other.time_s if other.time_s is not None else self.time_s)


@dataclass(frozen=True)
class Escalation:
    """One escalated request: of which job, for which cause, from what to what."""

    key: str
    task: str
    system: str
    job_id: str
    cause: str
    before: float
    after: float

    @property
    def what(self) -> str:
        return "memory" if self.cause == causes.MEMORY else "time"

    def describe(self) -> str:
        """``memory 2000 MB -> 4000 MB (out of memory, job 123)``."""
        show = show_mb if self.cause == causes.MEMORY else show_seconds
        return (f"{self.what} {show(self.before)} -> {show(self.after)} ({causes.WORDS[self.cause]}, job "
                f"{self.job_id})")

    def as_dict(self) -> dict[str, Any]:
        return {"task_id": self.key, "task": self.task, "system": self.system, "job_id": self.job_id,
                "cause": self.cause, "resource": self.what, "from": self.before, "to": self.after,
                "unit": "MB" if self.cause == causes.MEMORY else "s"}


def show_mb(mb: float) -> str:
    return f"{mb / 1024:g} GB" if mb >= 1024 and (mb / 1024).is_integer() else f"{mb:g} MB"


def show_seconds(value: float) -> str:
    value = int(value)
    return f"{value // 3600}:{value % 3600 // 60:02d}:{value % 60:02d}"


@dataclass(frozen=True)
class EscalationPolicy:
    """The run's escalation settings (None factors: off)."""

    memory_factor: float | None = None
    time_factor: float | None = None
    max_memory_mb: float | None = None
    max_time_s: float | None = None

    @property
    def on(self) -> bool:
        return bool(self.memory_factor or self.time_factor)

    def escalate(self, cause: str, current: Request) -> Request | None:
        """The request for the next job after one ended with ``cause`` having asked for ``current``; None when
        there is nothing to escalate (policy off for this cause, no request known, already at the most)."""
        if cause == causes.MEMORY and self.memory_factor and current.memory_mb:
            after = _bounded(current.memory_mb * self.memory_factor, self.max_memory_mb)
            return Request(memory_mb=float(math.ceil(after))) if after > current.memory_mb else None
        if cause == causes.TIME and self.time_factor and current.time_s:
            after = _bounded(current.time_s * self.time_factor, self.max_time_s)
            # Batch systems count run time in minutes or seconds: whole minutes where the request was.
            after = float(math.ceil(after / 60) * 60) if current.time_s % 60 == 0 else float(math.ceil(after))
            after = _bounded(after, self.max_time_s)
            return Request(time_s=after) if after > current.time_s else None
        return None


def _bounded(value: float, most: float | None) -> float:
    return min(value, most) if most else value
