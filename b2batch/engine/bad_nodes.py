"""Bad nodes: failures for node reasons counted per node, and the nodes a run excludes from later submissions.

A job that failed on a node for a node reason (the batch system's node failure, a set-up failure before the
task started, a job that ended without its wrapper writing its exit code) counts against that node. After
``max_node_failures`` such failures the node is excluded from the run's later submissions of that batch
system (each system writes the exclusion in its own syntax), but only while another node of that system has
run a job of this run to a good end: a run never excludes the only node it has seen work, nor does it blame a
node for a failure every node shares (a broken ``env_script``). ``max_node_failures = 0`` switches it off.
When a job ended well on a node is kept too: a job that ended there without its exit code is cleared by a good
end on the same node after it started (:meth:`NodeHealth.worked_since`), as on a one-node cluster.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class NodeFailure:
    """One failure counted against a node."""

    node: str
    system: str
    key: str
    job_id: str
    why: str
    at: float = field(default_factory=time.time)

    def as_dict(self) -> dict[str, Any]:
        return {"node": self.node, "system": self.system, "task_id": self.key, "job_id": self.job_id,
                "why": self.why, "at": self.at}


class NodeHealth:
    """Node failures and exclusions of one run, per batch system."""

    def __init__(self, max_failures: int = 3) -> None:
        self.max_failures = max_failures
        self.failures: dict[tuple[str, str], list[NodeFailure]] = {}
        #: Nodes where a job of the run ran or ended well, per system.
        self.good: dict[str, set[str]] = {}
        #: When a job of the run last ended well on a node (epoch seconds), per (system, node).
        self.last_good: dict[tuple[str, str], float] = {}
        #: Excluded nodes per system, in the order they were excluded.
        self._excluded: dict[str, list[str]] = {}

    @property
    def on(self) -> bool:
        return self.max_failures > 0

    def worked(self, system: str, node: str, at: float | None = None) -> None:
        """A job of the run runs, or ended well (``at``: when) on ``node``."""
        if node:
            self.good.setdefault(system, set()).add(node)
            if at is not None:
                self.last_good[(system, node)] = max(at, self.last_good.get((system, node), at))

    def worked_since(self, system: str, node: str, since: float) -> bool:
        """Whether a job of the run ended well on ``node`` of ``system`` after ``since`` (epoch seconds)."""
        return self.last_good.get((system, node), float("-inf")) > since

    def watching(self, system: str) -> bool:
        """Whether any node of ``system`` has a failure counted (only then is it worth finding where good jobs
        ran)."""
        return any(s == system for s, _ in self.failures)

    def others_worked(self, system: str, node: str) -> bool:
        """Whether a node of ``system`` other than ``node`` has run a job of the run to a good end."""
        return bool(self.good.get(system, set()) - {node})

    def fail(self, failure: NodeFailure) -> bool:
        """Count ``failure``; whether its node is excluded now (newly)."""
        counted = self.failures.setdefault((failure.system, failure.node), [])
        counted.append(failure)
        return self.review(failure.system, failure.node)

    def review(self, system: str, node: str) -> bool:
        """Exclude ``node`` if it has failed enough and another node worked; whether it was excluded now."""
        excluded = self._excluded.setdefault(system, [])
        if (not self.on or node in excluded or len(self.failures.get((system, node), [])) < self.max_failures
                or not self.others_worked(system, node)):
            return False
        excluded.append(node)
        return True

    def excluded(self, system: str) -> tuple[str, ...]:
        """The nodes ``system``'s later submissions must avoid."""
        return tuple(self._excluded.get(system, ()))

    def is_excluded(self, system: str, node: str) -> bool:
        return node in self._excluded.get(system, ())

    def report(self) -> dict[str, Any]:
        """For the run's report: every node with failures, and which are excluded."""
        nodes = []
        for (system, node), failures in sorted(self.failures.items()):
            nodes.append({"system": system, "node": node, "failures": len(failures),
                          "excluded": node in self._excluded.get(system, ()),
                          "why": [f.as_dict() for f in failures]})
        return {"max_node_failures": self.max_failures, "nodes": nodes,
                "excluded": {system: list(nodes) for system, nodes in self._excluded.items() if nodes}}
