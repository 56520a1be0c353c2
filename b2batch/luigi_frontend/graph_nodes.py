"""The nodes of :class:`~b2batch.luigi_frontend.graph_runner.GraphRunner`'s graph, and its ready set: the tasks
whose requirements are done, in buckets by priority (first come first served within one), so that handing out
the next costs O(1) amortised."""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass
from typing import Any

from luigi.scheduler import PENDING

from b2batch.luigi_frontend.grouping import Group


@dataclass(eq=False, slots=True)
class Node:
    """A task of the graph and what the runner knows of it."""

    task: Any
    status: str = PENDING
    runnable: bool = True
    priority: int = 0
    waiting_on: int = 0  # requirements not done
    # () until the first one: most of a large graph's tasks have no requirements, or no task needing them yet
    dependents: list[Node] | tuple[()] = ()
    deps: list[Node] | tuple[()] = ()
    needs: frozenset[tuple[str, int]] = frozenset()
    failures: int = 0
    queued: bool = False
    group: Group | None = None  # b2luigi's parameter grouping: the tasks it may share a batch job with
    #: The task's failure budget (its ``acceptance``, the fraction of requirements that must be done), or None.
    acceptance: float | None = None
    #: Whether the task will not be done in this run: it failed for good, cannot be scheduled or run, or a
    #: requirement it cannot do without is lost.
    lost: bool = False
    lost_deps: int = 0  # requirements that are lost (counted in waiting_on too)


class ReadySet:
    """Ready nodes by priority. A node whose priority was raised while it waited has a second entry in its new
    bucket; the old one is skipped when it comes up (it no longer matches the node's priority)."""

    def __init__(self) -> None:
        self._buckets: dict[int, deque[Node]] = {}
        self._priorities: list[int] = []  # a heap of -priority of the non-empty buckets
        #: How many entries pop() looked at (each at most once: no O(N) work per task handed out).
        self.operations = 0

    def __bool__(self) -> bool:
        return bool(self._priorities)

    def push(self, node: Node) -> None:
        bucket = self._buckets.get(node.priority)
        if bucket is None:
            bucket = self._buckets[node.priority] = deque()
        if not bucket:
            heapq.heappush(self._priorities, -node.priority)
        bucket.append(node)

    def pop(self) -> Node | None:
        """The ready task of highest priority (first come first served within a priority)."""
        while self._priorities:
            priority = -self._priorities[0]
            bucket = self._buckets[priority]
            while bucket:
                node = bucket.popleft()
                self.operations += 1
                if node.queued and node.status == PENDING and node.priority == priority:
                    node.queued = False
                    return node
            heapq.heappop(self._priorities)
        return None

    def unpop(self, node: Node) -> None:
        """Put a node just popped back in front of its bucket."""
        bucket = self._buckets.setdefault(node.priority, deque())
        if not bucket:
            heapq.heappush(self._priorities, -node.priority)
        bucket.appendleft(node)
        node.queued = True
