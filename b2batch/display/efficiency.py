"""Did the jobs use what they asked for? Efficiency per task family, from the figures in the run's record.

Each job's ``usage`` (:class:`b2batch.engine.usage.Usage`: the wrapper's own figures, with the batch system's
accounting where it answered) gives, per task family:

- ``cpu_efficiency``: CPU time / (wall time x CPUs requested), 0..1 (1 CPU when the request is unknown);
- ``memory_efficiency``: peak memory / memory requested, 0..1 (jobs with both known);
- ``killed_for_memory`` / ``killed_for_time``: jobs the batch system killed for that (``cause``);
- ``failed_nodes``: the nodes where jobs of the family failed, with how many (``hosts``: on how many nodes
  its jobs ran; the summary names failed nodes only when there were several);
- ``suggested_memory_mb`` and ``suggested_request``: the 95th percentile of the peak memory plus 20%, rounded
  up to 100 MB, in the batch system's own syntax (``--mem=400M``, ``h_vmem=400M``, ``request_memory = 400M``,
  ``-M 400MB``) and as the task setting that sets it (``suggested_setting``).

:func:`efficiency` gives the report's ``efficiency`` key; :func:`summary_lines` the few lines of the end
summary, only when there is something to say (efficiency under 50%, jobs killed for memory or time, failed
nodes).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from typing import Any

#: Efficiency under this share is worth a line in the summary.
LOW = 0.5
#: CPU efficiency is worth a line only for families whose jobs ran at least this long in all (seconds).
MIN_SECONDS = 60.0
#: The margin over the 95th percentile of the peak memory in a suggested request.
MARGIN = 0.2
MB = 1024 * 1024

#: A memory request of N MB in each batch system's syntax, and as the task setting that sets it.
SYNTAX = {
    "slurm": ("--mem={mb}M", 'slurm_settings={{"mem": "{mb}M"}}'),
    "sge": ("-l h_vmem={mb}M", 'sge_settings={{"resources": {{"h_vmem": "{mb}M"}}}}'),
    "htcondor": ("request_memory = {mb}M", 'htcondor_settings={{"request_memory": "{mb}M"}}'),
    "lsf": ("-M {mb}MB", 'lsf_settings={{"M": "{mb}MB"}}'),
}


def percentile(values: list[float], share: float) -> float:
    """The ``share`` quantile of ``values`` (nearest rank)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def suggested_mb(peaks_bytes: list[int]) -> int:
    """95th percentile of the peaks plus :data:`MARGIN`, rounded up to 100 MB."""
    need = percentile([float(p) for p in peaks_bytes], 0.95) * (1 + MARGIN) / MB
    return max(100, int(math.ceil(need / 100.0)) * 100)


def efficiency(records: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """Per task family (of jobs with figures): the report's ``efficiency`` key (documented in docs/report.md)."""
    families: dict[str, list[Any]] = {}
    for record in records:
        if record.usage:
            families.setdefault(record.family, []).append(record)
    found = {}
    for family, members in sorted(families.items()):
        found[family] = _family(members)
    return found


def _family(members: list[Any]) -> dict[str, Any]:
    systems = Counter(r.system for r in members)
    system = systems.most_common(1)[0][0]
    used = [r.usage for r in members]
    cpu = sum(u["cpu"] for u in used if u.get("cpu") is not None and u.get("wall"))
    capacity = sum(u["wall"] * (u.get("req_cpus") or 1) for u in used if u.get("cpu") is not None and u.get("wall"))
    with_memory = [u for u in used if u.get("max_rss") and u.get("req_mem")]
    peaks = [int(u["max_rss"]) for u in used if u.get("max_rss")]
    failed_nodes = Counter(r.usage.get("host") for r in members if r.state == "failed" and r.usage.get("host"))
    entry: dict[str, Any] = {
        "system": system,
        "jobs": len(members),
        "cpu_efficiency": round(cpu / capacity, 4) if capacity > 0 else None,
        "memory_efficiency": (round(sum(u["max_rss"] for u in with_memory) / sum(u["req_mem"] for u in with_memory), 4)
                              if with_memory else None),
        "cpu_hours": round(sum(u.get("cpu") or 0 for u in used) / 3600, 4),
        "peak_memory_mb": round(max(peaks) / MB, 1) if peaks else None,
        "p95_memory_mb": round(percentile([float(p) for p in peaks], 0.95) / MB, 1) if peaks else None,
        "requested_memory_mb": (round(max(u["req_mem"] for u in used if u.get("req_mem")) / MB, 1)
                                if any(u.get("req_mem") for u in used) else None),
        "killed_for_memory": sum(1 for u in used if u.get("cause") == "memory"),
        "killed_for_time": sum(1 for u in used if u.get("cause") == "time"),
        "failed_nodes": dict(failed_nodes.most_common()),
        "hosts": len({u.get("host") for u in used if u.get("host")}),
        "sources": dict(Counter(u.get("source") or "unknown" for u in used)),
    }
    if peaks:
        mb = suggested_mb(peaks)
        entry["suggested_memory_mb"] = mb
        if system in SYNTAX:
            request, setting = SYNTAX[system]
            entry["suggested_request"] = request.format(mb=mb)
            entry["suggested_setting"] = setting.format(mb=mb)
    return entry


def summary_lines(found: dict[str, dict[str, Any]], accounting: dict[str, str] | None = None) -> list[str]:
    """The end summary's lines on efficiency: only families with something to say; [] when none has."""
    lines = []
    for family, e in found.items():
        said = []
        cpu, memory = e.get("cpu_efficiency"), e.get("memory_efficiency")
        if cpu is not None and cpu < LOW and (e.get("cpu_hours") or 0) * 3600 / max(cpu, 1e-9) >= MIN_SECONDS:
            said.append(f"CPU {cpu:.0%}")
        if memory is not None and memory < LOW:
            said.append(f"memory {memory:.0%} (peak {_mb(e['peak_memory_mb'])} of {_mb(e['requested_memory_mb'])})")
        if e.get("killed_for_memory"):
            said.append(f"{e['killed_for_memory']} killed for memory")
        if e.get("killed_for_time"):
            said.append(f"{e['killed_for_time']} killed for time")
        if e.get("failed_nodes") and e.get("hosts", 0) > 1:  # on one host only, the node is no news
            said.append("failed on " + ", ".join(f"{n} ({c})" for n, c in list(e["failed_nodes"].items())[:5]))
        if not said:
            continue
        line = f"  {family} on {e['system']} ({e['jobs']} job(s)): " + "; ".join(said)
        if e.get("suggested_request") and (e.get("killed_for_memory") or (memory is not None and memory < LOW)):
            line += f"; ask for {e['suggested_request']} ({e['suggested_setting']})"
        lines.append(line)
    if not lines:
        return []
    head = "Efficiency (used / requested)"
    off = {s: why for s, why in (accounting or {}).items() if why.startswith("unavailable")}
    if off:
        head += "; " + ", ".join(f"{s} accounting {why}" for s, why in off.items())
    return ["", head + ":", *lines]


def _mb(value: float | None) -> str:
    if value is None:
        return "?"
    return f"{value / 1024:.1f} GB" if value >= 1024 else f"{value:.0f} MB"
