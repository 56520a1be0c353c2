"""Emulated execute nodes: which node a job starts on, nodes a job's submission excludes, and bad nodes.

For LSF (HTCondor's jobs keep this machine as their host). By default every job runs on this machine (its
short host name). ``inject lsf nodes a,b,c`` makes the
emulator place jobs on those named nodes (all still run here): each job goes to the allowed node with the
fewest active jobs (then the fewest placed so far). A job avoids the nodes its submission excludes in the batch system's own syntax (LSF:
``-R "select[hname!=a && hname!=b]"``). ``inject lsf bad-node a`` makes node ``a`` fail every job that
starts there before it runs, as a node whose file system mount is lost: the job ends at once with exit code 1
and its wrapper never runs (no exit-code file), and the node shows as its execute host.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from b2batch.emulators import job_table
from b2batch.emulators.common import hostname
from b2batch.emulators.job_table import JobTable

_LSF_AVOID = re.compile(r"hname\s*!=\s*['\"]?([A-Za-z0-9_.\-]+)")


def names(table: JobTable) -> list[str]:
    """The emulated nodes (this machine alone unless ``nodes`` was injected)."""
    return list(table.inject.get("nodes") or [hostname()])


def excluded(table: JobTable, job: dict[str, Any]) -> set[str]:
    """The nodes ``job``'s submission excludes."""
    if table.store.system == "lsf":
        return set(_LSF_AVOID.findall(str(job["attrs"].get("resreq") or "")))
    return set()


def pick(table: JobTable, job: dict[str, Any]) -> str | None:
    """The node ``job`` starts on: the allowed node with the fewest active jobs, then the fewest jobs placed on
    it so far (None: no node allowed, the job stays pending as on a real cluster)."""
    allowed = [node for node in names(table) if node not in excluded(table, job)]
    if not allowed:
        return None
    busy = Counter(j.get("node") for j in table.jobs.values() if j["status"] in job_table.ACTIVE)
    placed = Counter(j.get("node") for j in table.jobs.values())
    return min(allowed, key=lambda node: (busy[node], placed[node], allowed.index(node)))


def is_bad(table: JobTable, node: str | None) -> bool:
    return bool(node) and node in (table.inject.get("bad_nodes") or [])


def node_of(job: dict[str, Any]) -> str:
    """The node a job ran on (this machine for jobs placed before nodes were emulated)."""
    return str(job.get("node") or hostname())
