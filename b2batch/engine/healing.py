""":class:`Healing`: the run's self-healing policies on jobs that ended: memory and time escalation, bad nodes.

The run asks :meth:`Healing.resubmit_reason` about every job that ended; the answer is why to submit it again
("" for no reason of these policies), and the run submits it again within ``max_resubmissions``, as for a job
the batch system lost. The batch systems ask :meth:`Healing.request_for` (the escalated request of a job, to
write in their own syntax) and :meth:`Healing.excluded` (the nodes their later submissions avoid). What the
policies did goes into the run's record (``record.policies``), for the summary and the report JSON:

- ``escalations``: one entry per escalated job: ``task_id``, ``task``, ``system``, ``job_id`` (the job that was
  killed), ``cause`` (memory, time), ``resource``, ``from``, ``to``, ``unit`` (MB, s), ``factor``, ``most``;
- ``node_failures``: one entry per node with failures counted: ``system``, ``node``, ``failures``, ``excluded``,
  ``why`` (each failure: task, job, why, when), ``max_node_failures``.

Each entry has a one-line ``text`` for the end summary.

With the defaults (no factors; no node failing) no submission differs from a run without this module.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from b2batch.engine import causes
from b2batch.engine.escalation import Escalation, EscalationPolicy, Request
from b2batch.engine.bad_nodes import NodeFailure, NodeHealth
from b2batch.engine.outcome import JobOutcome, ended_at
from b2batch.engine.jobstate import JobStatus

if TYPE_CHECKING:
    from b2batch.engine.config import RunConfig
    from b2batch.engine.job import Job
    from b2batch.engine.record import RunRecord
    from b2batch.engine.system import BatchSystem

logger = logging.getLogger(__name__)

#: The wrapper's first line in the job's stdout names the node it started on and when (``date -Is``).
_STARTED_ON = re.compile(rb"^b2batch: job of task .* started on (\S+) at (\S+)", re.M)
#: Batch systems' words for a job a person cancelled (no node's fault).
_CANCELLED = re.compile(r"CANCELLED|TERM_OWNER|by user|condor_rm", re.I)
_SETUP = "the job's set-up failed"
#: Exit code of the job wrapper when the job's own set-up failed.
_SETUP_FAILED = 3


def started_on(job: Job) -> str:
    """The node the job's wrapper said it started on (the first lines of its stdout), or ""."""
    return start_of(job)[0]


def start_of(job: Job) -> tuple[str, float | None]:
    """The node the job's wrapper said it started on and when (epoch seconds; None if unreadable), from the
    first lines of its stdout; ("", None) when it did not say."""
    try:
        with open(job.files.stdout, "rb") as f:
            head = f.read(4096)
    except OSError:
        return "", None
    lines = list(_STARTED_ON.finditer(head))
    if not lines:
        return "", None
    found = lines[-1]  # the last: a job Slurm requeued may append to its stdout
    from datetime import datetime  # only once a node is suspected: not on every run's import path

    try:
        when: float | None = datetime.fromisoformat(found.group(2).decode()).timestamp()
    except ValueError:
        when = None
    return found.group(1).decode(errors="replace"), when


class Healing:
    """The self-healing policies of one run."""

    def __init__(self, config: RunConfig, record: RunRecord) -> None:
        self.policy = EscalationPolicy(config.retry_memory_factor, config.retry_time_factor,
                                       config.max_retry_memory_mb, config.max_retry_time_s)
        self.nodes = NodeHealth(config.max_node_failures)
        self.escalations: list[Escalation] = []
        self._requests: dict[str, Request] = {}
        self._warned: set[tuple[str, str]] = set()
        #: Jobs whose failure may be their node's (node, why, since), by key, until another node is seen to work
        #: (or, with ``since``, the same node ends a job well after that moment).
        self._suspects: dict[str, tuple[str, str, float | None]] = {}
        #: When the run saw each job that failed for a node reason end last, by key: its next job started later.
        self._failed_at: dict[str, float] = {}
        #: Told the batch system's name and its excluded nodes when a node is excluded (the run: so that jobs
        #: already queued move off it where the batch system allows).
        self.on_excluded: Callable[[str, tuple[str, ...]], None] | None = None
        self.record = record
        self._publish()

    # --- what batch systems ask -----------------------------------------------------------------------

    def request_for(self, job: Job) -> Request | None:
        """The escalated request of ``job`` (None: it asks for what its settings say)."""
        return self._requests.get(job.key)

    def excluded(self, system: str) -> tuple[str, ...]:
        """The nodes later submissions to ``system`` must avoid."""
        return self.nodes.excluded(system)

    def node_works(self, system: str, node: str, at: float | None = None) -> None:
        """A job of the run runs, or ended well (``at``: when), on ``node`` of ``system``: nodes that failed
        enough are excluded now that another one is seen working."""
        if not node or not self.nodes.on:
            return
        known = node in self.nodes.good.get(system, ())
        self.nodes.worked(system, node, at)
        if known:
            return
        for (name, suspect), _ in list(self.nodes.failures.items()):
            if name == system and self.nodes.review(name, suspect):
                self._excluded_now(system, suspect)

    # --- what the run asks ----------------------------------------------------------------------------

    def resubmit_reason(self, job: Job, state: JobOutcome, system: BatchSystem) -> str:
        """Account for the end of ``job`` from its outcome (the engine's one reading of it, the run's); why to
        submit it again, or ""."""
        self._suspects.pop(job.key, None)  # each end is judged afresh: an earlier suspicion went with its job
        if state.status == JobStatus.successful:
            # Where the batch system names the node, every good end counts; else the wrapper's log is read only
            # once some node is suspected.
            if self.nodes.on and (state.node or self.nodes.watching(job.system)):
                self.node_works(job.system, state.node or started_on(job), ended_at(job.files) or time.time())
            return ""
        if state.status != JobStatus.aborted:
            return ""
        cause, why = self._cause(job, state)
        room = job.resubmissions < job.config["max_resubmissions"]
        if cause == causes.NODE:
            return self._node_failure(job, state, why, room)
        if cause in (causes.MEMORY, causes.TIME) and self.policy.on and room:
            return self._escalate(job, state, cause, system)
        return ""

    def _cause(self, job: Job, state: JobOutcome) -> tuple[str, str]:
        if state.cause:
            return state.cause, state.reason or causes.WORDS.get(state.cause, state.cause)
        code = state.exit_code
        if code == _SETUP_FAILED and state.setup_failure:
            return causes.NODE, f"{_SETUP}: {state.setup_failure}"
        if code is None and state.node and not state.cancelled and not _CANCELLED.search(state.reason):
            return causes.NODE, (f"the job ended without its wrapper writing its exit code (lost file system?)"
                                 f"{': ' + state.reason if state.reason else ''}")
        return "", ""

    def _node_failure(self, job: Job, state: JobOutcome, why: str, room: bool) -> str:
        said, started = start_of(job)
        node = state.node or said
        if not node or not self.nodes.on:
            return ""
        # Since when a good end on this same node clears a job that ended without its exit code: its start (a
        # stdout may still hold an earlier job's line: not before the run saw that one fail), else now.
        known = [t for t in (started, self._failed_at.get(job.key)) if t is not None]
        since = max(known) if known else time.time()
        self._failed_at[job.key] = time.time()
        if self.nodes.fail(NodeFailure(node, job.system, job.key, str(job.job_id), why.splitlines()[0])):
            self._excluded_now(job.system, node)
        self._publish()
        count = len(self.nodes.failures[(job.system, node)])
        logger.warning("Job %s: task %s failed on node %s for a node reason (%d on that node): %s", job.job_id, job,
                       node, count, why.splitlines()[0])
        if state.scheduler_side or not room:
            return ""  # the run submits scheduler-side failures again by itself
        # A node failure the batch system names (Slurm NODE_FAIL, LSF's lost host) goes again. One b2batch infers
        # (a set-up failure: env_script, working_dir; a job that ended without its wrapper's exit code) may be
        # everyone's, or the only node's: it goes again only once another node has worked, so that a run on a
        # healthy or one-node cluster fails such a job as it did before the policy.
        # A job that ended without its exit code is cleared as well by a job that ended well on the same node after
        # it started (slurmd restarted; a job step killed): only a node that fails every job fails it. A set-up
        # failure is not: its cause may be the task's own (working_dir, env_script), which another's end there
        # does not clear.
        named = bool(state.cause)
        suspect = (node, why.splitlines()[0], since if state.exit_code is None else None)
        if named or self.nodes.is_excluded(job.system, node) or self._cleared(job.system, suspect):
            return f"node failure on {node} ({why.splitlines()[0]})"
        self._suspects[job.key] = suspect  # the run parks it until that is known
        return ""

    def _cleared(self, system: str, suspect: tuple[str, str, float | None]) -> bool:
        node, _, since = suspect
        return self.nodes.others_worked(system, node) or (
            since is not None and self.nodes.worked_since(system, node, since))

    # --- jobs the run parks -----------------------------------------------------------------------------

    def suspected(self, job: Job) -> bool:
        """Whether ``job`` just failed in a way that is its node's fault only if another node of its batch system
        works (a job that ended without its wrapper's exit code, a set-up failure), before any did: a node that
        fails every job from the start (a lost mount) fails the first jobs before another node has run one to
        its end (one that ended without its exit code: nor has its own node ended a job well since it started). The
        run parks such a job instead of failing it: see :meth:`parked_reason`."""
        return job.key in self._suspects

    def parked_reason(self, job: Job) -> str:
        """Why to submit a parked job again: another node has worked since, or (a job without its exit code) its
        own node has ended a job well after it started; "" while neither is known."""
        suspect = self._suspects.get(job.key)
        if suspect is not None and self._cleared(job.system, suspect):
            del self._suspects[job.key]
            return f"node failure on {suspect[0]} ({suspect[1]})"
        return ""

    def unpark(self, job: Job) -> None:
        """The run gives a parked job back as failed (no other job of its batch system is left to show that
        a node works: one node, or every node, fails such jobs)."""
        self._suspects.pop(job.key, None)

    def _excluded_now(self, system: str, node: str) -> None:
        count = len(self.nodes.failures.get((system, node), []))
        logger.warning("Node %s of %s failed %d job(s) of this run for node reasons (max_node_failures = %d): "
                       "later jobs avoid it", node, system, count, self.nodes.max_failures)
        self._publish()
        if self.on_excluded is not None:
            self.on_excluded(system, self.nodes.excluded(system))

    def _escalate(self, job: Job, state: JobOutcome, cause: str, system: BatchSystem) -> str:
        # The batch system itself, also behind a front of the run's own (job shapes, pilots: their ``inner``).
        while not hasattr(system, "requested") and hasattr(system, "inner"):
            system = system.inner
        asked = getattr(system, "requested", None)
        current = (asked(job) if asked is not None else Request()).merged(self._requests.get(job.key))
        new = self.policy.escalate(cause, current)
        if new is None:
            if (job.key, cause) not in self._warned:
                self._warned.add((job.key, cause))
                what = "memory" if cause == causes.MEMORY else "time"
                have = current.memory_mb if cause == causes.MEMORY else current.time_s
                logger.warning("Job %s: task %s was killed (%s) but its %s request is not escalated: %s", job.job_id,
                               job, causes.WORDS[cause], what,
                               f"it is at the most (max_retry_{what})" if have else
                               f"its {system.name} settings ask for no {what} b2batch can read")
            return ""
        before = current.memory_mb if cause == causes.MEMORY else current.time_s
        after = new.memory_mb if cause == causes.MEMORY else new.time_s
        assert before is not None and after is not None
        escalation = Escalation(job.key, job.name, job.system, str(job.job_id), cause, before, after)
        self.escalations.append(escalation)
        self._requests[job.key] = (self._requests.get(job.key) or Request()).merged(new)
        self._publish()
        return f"{causes.WORDS[cause]}: escalating {escalation.describe()}"

    # --- the record ---------------------------------------------------------------------------------

    def _publish(self) -> None:
        """What the policies did, as the report's policy entries (each with a one-line ``text``)."""
        policy = self.policy
        self.record.policies["escalations"] = [
            {**e.as_dict(), "factor": policy.memory_factor if e.cause == causes.MEMORY else policy.time_factor,
             "most": policy.max_memory_mb if e.cause == causes.MEMORY else policy.max_time_s,
             "text": f"{e.task} on {e.system}: {e.describe()}"} for e in self.escalations]
        nodes = self.nodes.report()["nodes"]
        self.record.policies["node_failures"] = [
            {**n, "max_node_failures": self.nodes.max_failures,
             "text": f"{n['node']} ({n['system']}): {n['failures']} failure(s), "
                     f"{'excluded from later jobs' if n['excluded'] else 'not excluded'}; last: {n['why'][-1]['why']}"}
            for n in nodes]
