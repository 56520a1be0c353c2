"""What a job used: wall time, CPU time, peak memory, the node, and what it asked for, as one value.

Figures come from two places:

- the job's own wrapper writes ``usage.json`` next to its exit-code file (the pilot or bundle worker of a unit
  puts the same figures into the unit's line in its log of the work queue, :attr:`Job.measured
  <b2batch.engine.job.Job.measured>`): wall, CPU (user + system, children included) and peak RSS from
  ``getrusage``, and the host; every job and every unit has these, whatever the batch system;
- the batch system's accounting (``sacct``, ``qacct``, ``condor_history``, ``bjobs``), asked once per poll
  cycle for all jobs that ended since the last (:mod:`b2batch.systems.accounting`), adds what only the
  scheduler knows: what the job requested, its final state, and its figures as the scheduler measured them.

:meth:`Usage.merged` puts the two together: the scheduler's figures where it has them, the wrapper's for the
rest. ``cause`` names why the batch system killed a job: ``"memory"`` (Slurm OUT_OF_MEMORY, LSF TERM_MEMLIMIT,
SGE exit 137 with its peak at the h_vmem limit, HTCondor's memory hold) or ``"time"`` (Slurm TIMEOUT, LSF
TERM_RUNLIMIT, SGE h_rt/s_rt); empty otherwise. Retry escalation reads the same field.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

#: Values of :attr:`Usage.cause`.
CAUSES = ("memory", "time")


@dataclass(frozen=True)
class Usage:
    """One job's (or unit's) resource figures; None where unknown."""

    #: Seconds from start to end.
    wall: float | None = None
    #: CPU seconds, user + system, children included.
    cpu: float | None = None
    #: Peak resident memory, bytes.
    max_rss: int | None = None
    #: Memory requested from the batch system, bytes.
    req_mem: int | None = None
    #: CPUs requested.
    req_cpus: int | None = None
    #: Where it ran.
    host: str | None = None
    #: The scheduler's final state in its own words (e.g. ``OUT_OF_MEMORY``, ``TERM_MEMLIMIT``).
    state: str | None = None
    exit_code: int | None = None
    #: Why the batch system killed it: one of :data:`CAUSES`, or "".
    cause: str = ""
    #: Where the figures come from: ``wrapper``, ``sacct``, ``qacct``, ``condor_history``, ``bjobs``, or
    #: ``sacct+wrapper`` when merged.
    source: str = ""

    def as_dict(self) -> dict[str, Any]:
        # (the fields are flat values: dataclasses.asdict's deep copy is not needed, and costs per job)
        return Usage.clean(vars(self))

    @staticmethod
    def clean(data: dict[str, Any]) -> dict[str, Any]:
        """``Usage.of(data).as_dict()`` without making the Usage (a unit's figures, recorded as they came)."""
        return {name: value for name in _NAMES if (value := data.get(name)) is not None and value != ""}

    @classmethod
    def of(cls, data: dict[str, Any] | None) -> Usage | None:
        if not data:
            return None
        return cls(**{k: v for k, v in data.items() if k in _NAMES})

    def merged(self, wrapper: Usage | None) -> Usage:
        """These (the scheduler's) figures, with the wrapper's where these have none."""
        if wrapper is None:
            return self
        filled = {name: theirs for name in _NAMES if getattr(self, name) in (None, "")
                  and (theirs := getattr(wrapper, name)) is not None and theirs != ""}
        filled.pop("source", None)
        source = f"{self.source}+{wrapper.source}" if filled and self.source else (self.source or wrapper.source)
        return replace(self, **filled, source=source)


_NAMES = tuple(f.name for f in fields(Usage))


def read_usage(path: Path | str) -> Usage | None:
    """The figures a wrapper or worker wrote to ``path`` (``usage.json``), or None (none written, unreadable)."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.loads(f.read())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    usage = Usage.of(data)
    return usage if usage is None or usage.source else replace(usage, source="wrapper")


# --- parsing the schedulers' units -------------------------------------------------------------------------

_UNITS = {"": 1, "B": 1, "K": 1024, "M": 1024 ** 2, "G": 1024 ** 3, "T": 1024 ** 4, "P": 1024 ** 5}


def memory_bytes(text: Any, default_unit: str = "") -> int | None:
    """``322156K``, ``600M``, ``2Gn``, ``1.5G``, ``512 Mbytes``, ``1024`` (in ``default_unit``) as bytes;
    None for empty or unreadable values (``0``, ``-``, ``N/A`` included where meaningless)."""
    if text is None:
        return None
    if isinstance(text, (int, float)):
        return int(text * _UNITS[default_unit.upper()])
    value = str(text).strip()
    match = re.fullmatch(r"([0-9]*\.?[0-9]+)\s*([KMGTPkmgtp]?)(?:i?[Bb](?:ytes)?)?([nc]?)", value)
    if not match:
        return None
    unit = (match.group(2) or default_unit).upper()
    return int(float(match.group(1)) * _UNITS[unit])


def duration_seconds(text: Any) -> float | None:
    """Slurm's ``[D-]HH:MM:SS[.fff]``, ``MM:SS.fff``, or plain seconds, as seconds; None if unreadable."""
    if text is None:
        return None
    if isinstance(text, (int, float)):
        return float(text)
    value = str(text).strip()
    match = re.fullmatch(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+(?:\.\d+)?)", value)
    if match:
        days, hours, minutes, seconds = match.groups()
        return int(days or 0) * 86400 + int(hours or 0) * 3600 + int(minutes) * 60 + float(seconds)
    try:
        return float(value.split()[0])
    except (ValueError, IndexError):
        return None


def usage_file(files: Any) -> Path | str:
    """Where a job's wrapper (or a unit's worker) writes its figures: ``usage.json`` beside the exit-code file."""
    path_of = getattr(files, "path_of", None)  # JobFiles; other stand-ins name only their exit-code file
    return path_of("usage") if path_of is not None else Path(files.exit_code).with_name("usage.json")


def figures(wall: float, cpu: float, max_rss_kb: int, host: str) -> dict[str, Any]:
    """What a wrapper or worker measured of one job or unit (``getrusage`` of its child: ru_maxrss is in KiB on
    Linux), as :meth:`Usage.of` reads it."""
    # (a unit's CPU is the difference of two readings of its runner's clock: a tiny negative one is 0, not -0.0)
    return {"wall": max(0.0, round(wall, 3)), "cpu": max(0.0, round(cpu, 3)), "max_rss": int(max_rss_kb) * 1024,
            "host": host, "source": "wrapper"}


def measured(wall: float, cpu: float, max_rss_kb: int, host: str) -> str:
    """The JSON of :func:`figures`, as a wrapper writes it to ``usage.json``."""
    return json.dumps(figures(wall, cpu, max_rss_kb, host)) + "\n"
