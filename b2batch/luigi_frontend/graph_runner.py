"""b2batch's own runner of a luigi graph: each ready task is handed out in O(1) amortised time.

Why not luigi's worker and scheduler: for every task it hands out, luigi's local scheduler looks at the whole
graph (``get_work``, ``count_pending``, ``prune``; luigi issue 1750), so a graph of N tasks costs O(N²): a day
of CPU for 100,000 tasks. A scheduler subclass could cache parts of that, but only by leaning on more of
luigi's private state. This runner keeps what luigi users rely on, with the same public objects:

- the graph is found as luigi's worker finds it: ``complete()``, ``deps()`` (``requires()``), external tasks,
  ``disabled``, and the events ``DEPENDENCY_DISCOVERED``, ``DEPENDENCY_PRESENT``, ``DEPENDENCY_MISSING``
  and ``BROKEN_TASK``;
- each task knows how many of its requirements are not done; a task whose count drops to 0 joins the ready
  set, kept in buckets by priority (a task's priority is raised to the highest of the tasks needing it, as
  luigi's scheduler does), so handing out the next task costs O(1) amortised;
- ``--workers`` bounds the tasks running at once (the tasks of a parameter group in one job count once),
  ``resources`` (luigi's ``[resources]`` config) bound those that need them; tasks that do not fit wait in a
  queue per resource need;
- dynamic requirements (``yield`` in ``run()``) join the graph when a job reports them;
- a failed task is tried again after ``retry_delay`` while fewer than its ``retry_count`` attempts failed
  when luigi's worker is told to keep alive (``[worker] keep_alive``), as luigi's scheduler does;
- ``START``, ``SUCCESS``, ``FAILURE`` and ``PROCESSING_TIME`` fire where the task runs: in its job, or here
  for tasks that stay on this machine (``run_local``, wrapper tasks; b2luigi's ``local`` tasks, which with more
  than one worker run in child processes, as luigi's worker runs them);
- luigi's execution summary and status codes come from the same history luigi's worker keeps
  (:class:`~b2batch.luigi_frontend.seam.SummaryView`).
"""

from __future__ import annotations

import contextlib
import heapq
import logging
import time
import traceback
from collections import Counter, deque
from typing import Any

import luigi
import luigi.configuration
import luigi.scheduler
import luigi.task
import luigi.task_register
import luigi.worker
from luigi.scheduler import DISABLED, DONE, FAILED, PENDING, RUNNING, UNKNOWN

from b2batch.engine import RunRecord
from b2batch.engine.steering import Step, Steering, drive
from b2batch.errors import OutputPathError
from b2batch.luigi_frontend import layout, local_on_engine, seam
from b2batch.luigi_frontend.acceptance import FailureBudgets, acceptance_of
from b2batch.luigi_frontend.graph_checks import check_task_class, check_writable_folders
from b2batch.luigi_frontend.graph_nodes import Node, ReadySet
from b2batch.luigi_frontend.grouping import Slots
from b2batch.luigi_frontend.jobs import TaskJobs, TaskResult
from b2batch.luigi_frontend.local_children import LocalChildren
from b2batch.luigi_frontend.task_on_node import StatusReporter
from b2batch.settings import active_profile

logger = logging.getLogger(__name__)
#: Seconds a run without --batch hands out ready tasks before it polls again (:meth:`GraphRunner._start_ready`).
HAND_OUT_SLICE = 0.2


class GraphRunner(FailureBudgets, Steering):
    """Runs a luigi graph whose tasks become engine jobs (or run here), handing out ready tasks in O(1)."""

    def __init__(self, jobs: TaskJobs, workers: int = 1, record: RunRecord | None = None,
                 errors: dict[str, str] | None = None) -> None:
        self.jobs = jobs
        #: A run without --batch on the engine (:mod:`.local_on_engine`): its tasks' events fire here.
        self.events_here = bool(getattr(jobs, "events_in_steering", False))
        self.workers = max(1, int(workers))
        self.record = record
        self.nodes: dict[str, Node] = {}
        self.summary = seam.SummaryView(self.workers)
        self.scheduling_succeeded = True
        self.run_succeeded = True
        self.ready = ReadySet()
        self._blocked: dict[frozenset[tuple[str, int]], deque[Node]] = {}
        self._retries: list[tuple[float, int, Node]] = []
        self._running: dict[str, Node] = {}
        self.slots = Slots(self.workers)  # --workers, counted in jobs (a group's tasks share one)
        self._grouping = False  # whether some task is grouped: its group's tasks then go out together
        self._used: Counter[str] = Counter()
        self._resources = luigi.configuration.get_config().getintdict("resources")
        self._worker_config = luigi.worker.worker()
        self._retry_delay = float(luigi.scheduler.scheduler().retry_delay)
        self._sequence = 0
        #: b2luigi's tasks on the batch system local run in child processes while others run, when there is
        #: more than one worker (as luigi's worker runs them then); with one, here (see _in_child).
        self.children = LocalChildren(self.summary._id) if self.workers > 1 else None
        #: A run without --batch hands out ready tasks for at most this many seconds (one task at least) before
        #: the run's next poll: the pilots' results come back while more tasks go out (on a busy machine the
        #: hand-out of a thousand tasks outlasts the pilots' start).
        self.hand_out_slice = HAND_OUT_SLICE if self.events_here else None
        self._more_ready = False  # the last hand-out stopped at its slice with tasks still ready
        self._classes: set[type] = set()  # task classes whose attributes were checked for misspelt settings
        self._folders_checked: set[type] = set()  # task classes whose log_dir and result_dir were checked
        self._outputs: dict[str, Any] = {}  # output path -> the task that will write it
        #: Why tasks could not be scheduled (their complete() or requires() raised), by task id.
        self.errors: dict[str, str] = {} if errors is None else errors

    # --- the graph ------------------------------------------------------------------------------------

    def add(self, task: Any) -> bool:
        """Add ``task`` and everything it requires that is not complete; whether scheduling succeeded."""
        succeeded = True
        added: list[tuple[Node, list[Any]]] = []
        stack = [task]
        while stack:
            current = stack.pop()
            if current.task_id in self.nodes:
                continue
            node, deps, ok = self._add_one(current)
            succeeded &= ok
            added.append((node, deps))
            stack.extend(dep for dep in deps if dep.task_id not in self.nodes)
        for node, deps in added:  # every requirement has its node now
            self._link(node, deps)
        for node, _deps in added:  # will never be done: external data that is missing, unschedulable
            if node.status != DONE and not node.runnable:
                self._lose(node)
        for node, _deps in added:
            self._make_ready_if_due(node)
        self.scheduling_succeeded &= succeeded
        return succeeded

    def _add_one(self, task: Any) -> tuple[Node, list[Any], bool]:
        """One task as luigi's worker adds it: its status, runnability and requirements, with luigi's events."""
        node = Node(task=task, priority=int(getattr(task, "priority", 0) or 0))
        if type(task) not in self._classes:
            self._classes.add(type(task))
            check_task_class(type(task))  # a misspelt setting stops the run before anything is submitted
        self.nodes[task.task_id] = node
        deps, ok = self._classify(task, node)
        if getattr(task, "disabled", False):
            node.status = DISABLED
        if node.status == PENDING and node.runnable:
            self._claim_outputs(task)
            if self.jobs.runs_as_job(task):
                node.group = self.jobs.group_of(task)  # a wrong max_grouping_size stops the run here
                if type(task) not in self._folders_checked:  # once per class: settings are mostly per class
                    self._folders_checked.add(type(task))
                    # lost logs and outputs stop the run before any submission
                    check_writable_folders(task, self.jobs.config_of(task))
                self._grouping |= node.group is not None
        for dep in deps:
            task.trigger_event(luigi.Event.DEPENDENCY_DISCOVERED, task, dep)
        needs = task.process_resources()
        if needs:  # most tasks need none: they keep the class default, not a frozenset each
            node.needs = frozenset(needs.items())
        node.acceptance = acceptance_of(task)  # a wrong value stops the run here
        self.summary.add(task, node.status, node.runnable)
        if self.record is not None and node.status == PENDING and node.runnable and self.jobs.runs_as_job(task):
            try:
                self.record.expect(task.task_id, task.task_family, self.jobs.system_of(task))
            except Exception:  # an unknown batch system stops the run when the task is handed out
                pass
        return node, deps, ok

    def _classify(self, task: Any, node: Node) -> tuple[list[Any], bool]:
        """Set the node's status and runnability as luigi's worker would; the task's requirements (if it is to
        run) and whether scheduling it succeeded."""
        try:
            complete = task.complete()
            if complete not in (True, False):
                raise TypeError(f"Return value of Task.complete() must be boolean (was {complete!r})")
        except Exception as e:
            self.errors[task.task_id] = f"its complete() raised {type(e).__name__}: {e}"
            logger.warning("Will not run %s or any dependencies due to error in complete() method:\n%s", task,
                           traceback.format_exc())
            task.trigger_event(luigi.Event.DEPENDENCY_MISSING, task)
            node.status, node.runnable = UNKNOWN, False
            return [], False
        as_job = self.jobs.runs_as_job(task)
        if complete and (self.jobs.outputs_count(task) if as_job else self._wrapped_outputs_count(task)):
            node.status, node.runnable = DONE, False
            task.trigger_event(luigi.Event.DEPENDENCY_PRESENT, task)
            return [], True
        if task.run is None or task.run == NotImplemented:
            node.status, node.runnable = PENDING, False
            task.trigger_event(luigi.Event.DEPENDENCY_MISSING, task)
            logger.warning("Data for %s does not exist (yet?). The task is an external data dependency, so it "
                           "cannot be run from this luigi process.", task)
            return [], True
        try:
            deps = list(task.deps())
            for dep in deps:
                if not isinstance(dep, luigi.Task):
                    raise TypeError(f"requires() must return Task objects but {dep} is a {type(dep)}")
        except Exception as e:
            self.errors[task.task_id] = f"its requires() raised {type(e).__name__}: {e}"
            logger.warning("Will not run %s or any dependencies due to error in deps() method:\n%s", task,
                           traceback.format_exc())
            task.trigger_event(luigi.Event.BROKEN_TASK, task, e)
            node.status, node.runnable = UNKNOWN, False
            return [], False
        return deps, True

    def _wrapped_outputs_count(self, task: Any) -> bool:
        """Whether a complete task that runs here is done. A wrapper task is complete because its requirements
        are: it is done only when the outputs of the jobs it wraps (through other wrappers too) count (see
        :meth:`TaskJobs.outputs_count`); otherwise it and they are looked at one by one."""
        stack, seen = [task], set()
        while stack:
            current = stack.pop()
            if not isinstance(current, luigi.WrapperTask) or current.task_id in seen:
                continue
            seen.add(current.task_id)
            for requirement in luigi.task.flatten(current.requires()):
                if isinstance(requirement, luigi.WrapperTask):
                    stack.append(requirement)
                elif self.jobs.runs_as_job(requirement) and not self.jobs.outputs_count(requirement):
                    return False
        return True

    def _claim_outputs(self, task: Any) -> None:
        """Two tasks that will run must not write the same output: their jobs would race."""
        for target in luigi.task.flatten(task.output()):
            path = str(getattr(target, "path", target))
            owner = self._outputs.setdefault(path, task)
            if owner is not task and owner != task and self.events_here:  # no --batch: warn, as luigi's worker run
                logger.warning("Tasks %s and %s both declare the output %s: one overwrites the other's. Give the "
                               "tasks parameters (or output file names) that tell their outputs apart. In a "
                               "--batch run, where their jobs would write it at the same time, this stops the "
                               "run.", owner, task, path)
            elif owner is not task and owner != task:
                raise OutputPathError(f"Tasks {owner} and {task} both declare the output {path}: their jobs would "
                                      f"write it at the same time. Give the tasks parameters that tell their "
                                      f"outputs apart (or different result_dir settings).")

    def _link(self, node: Node, requirements: list[Any]) -> None:
        """Make the tasks ``requirements`` (whose nodes exist) requirements of ``node`` (each once): count those
        not done, raise their priorities to the node's."""
        present = {id(dep) for dep in node.deps}
        for task in requirements:
            dep = self.nodes[task.task_id]
            if id(dep) in present:
                continue
            present.add(id(dep))
            if not node.deps:
                node.deps = []
            node.deps.append(dep)  # type: ignore[union-attr]
            if not dep.dependents:
                dep.dependents = []
            dep.dependents.append(node)  # type: ignore[union-attr]
            if dep.status != DONE:
                node.waiting_on += 1
            if dep.lost:
                node.lost_deps += 1
            self._raise_priority(dep, node.priority)

    def _raise_priority(self, node: Node, priority: int) -> None:
        stack = [(node, priority)]
        while stack:
            current, value = stack.pop()
            if value <= current.priority:
                continue
            current.priority = value
            if current.queued:
                self._push(current)  # a new entry in the higher bucket; the old one is skipped when popped
            stack.extend((dep, value) for dep in current.deps)

    # --- the ready set --------------------------------------------------------------------------------

    def _make_ready_if_due(self, node: Node) -> None:
        if node.status != PENDING or not node.runnable or node.queued or node.lost:
            return
        if node.lost_deps and not self._within_budget(node):
            self._lose(node)
        elif node.waiting_on - node.lost_deps == 0:  # every requirement done, or lost within the budget
            node.queued = True
            self._push(node)

    def _push(self, node: Node) -> None:
        self.ready.push(node)

    @property
    def operations(self) -> int:
        """How many nodes the hand-out looked at, for tests that check it does no O(N) work per task."""
        return self.ready.operations

    def _fits(self, needs: frozenset[tuple[str, int]]) -> bool:
        return all(amount + self._used[name] <= self._resources.get(name, 1) for name, amount in needs)

    # --- running ---------------------------------------------------------------------------------------

    def run(self) -> bool:
        """Run until nothing is running and nothing can start; whether every task that ran succeeded."""
        try:
            drive(self.jobs.run, self)
        finally:
            if self.children is not None:
                self.children.kill()  # none left after a normal end; an interrupted run leaves none behind
        return self.run_succeeded

    def pause(self, run: Any) -> None:
        """The wait between two polls; with tasks in child processes, until one of them ends (at most as long)."""
        if self.children:
            self.children.wait(run.poll_pause)
        else:
            run.wait()

    # the engine's loop (engine/steering.py): start what is ready, judge what ended, stop when nothing can go on

    def feed(self) -> None:
        self._start_ready()

    def ended(self, job: Any) -> None:
        self.jobs.ended(job)

    def step(self, ended: int) -> Step:
        results = self.jobs.results()
        if self.children:
            results += self.children.ended()
        for result in results:
            self._handle(result)
        if results or self._more_ready:
            return Step.AGAIN
        retries_ahead = self._retries_due()  # first: a retry that comes due now makes its task ready
        if not self._running and not self.ready and not retries_ahead:
            return Step.STOP  # tasks still blocked now need more of a resource than luigi's config has: as luigi does
        return Step.WAIT

    def _retries_due(self) -> bool:
        """Queue the failed tasks whose retry time came; whether any retry is still ahead."""
        now = time.time()
        while self._retries and self._retries[0][0] <= now:
            _at, _n, node = heapq.heappop(self._retries)
            node.status = PENDING
            self._make_ready_if_due(node)
        return bool(self._retries)

    def _start_ready(self) -> None:
        self._retries_due()
        self.slots.begin()
        self._more_ready = False
        # (not when tasks are grouped: a group's tasks go out in one hand-out, to share their jobs)
        sliced = self.hand_out_slice is not None and not self._grouping
        deadline = time.monotonic() + self.hand_out_slice if sliced else None  # type: ignore[operator]
        started = 0
        with self.jobs.run.holding() if self._grouping else contextlib.nullcontext():
            while not self.slots.full():
                if started and deadline is not None and time.monotonic() > deadline:
                    self._more_ready = bool(self.ready)  # the rest after the next poll (step() says AGAIN)
                    return
                node = self.ready.pop()
                if node is None:
                    return
                if node.needs and not self._fits(node.needs):
                    self._blocked.setdefault(node.needs, deque()).append(node)
                    continue
                if not self.slots.take(node.task.task_id, node.group):
                    self.ready.unpop(node)  # no worker free, and no job of its group with room
                    return
                self._start(node)
                started += 1

    def _start(self, node: Node) -> None:
        task = node.task
        node.status = RUNNING
        if node.lost_deps:
            self._note_without(node)
        self._running[task.task_id] = node
        self._used.update(dict(node.needs))
        if self.jobs.runs_as_job(task):
            if self.events_here:
                local_on_engine.started(task)
            self.jobs.start(task)
            return
        if self._in_child(task):
            self.children.start(task, check_requirements=node.acceptance is None)  # type: ignore[union-attr]
            return
        logger.info("Running %s in this process", task)
        status, explanation, _missing, new_deps = seam.run_in_process(task, self.summary._id, StatusReporter(),
                                                                      check_requirements=node.acceptance is None)
        self._handle(TaskResult(task, status, explanation, new_deps))

    def _in_child(self, task: Any) -> bool:
        """Whether ``task``, which stays on this machine, runs in a child process: with more than one worker, a
        task that b2luigi's worker would run, with its batch system ``local`` (not a wrapper task, nor one
        with ``run_local``, which stay here)."""
        return (self.children is not None and active_profile() == "b2luigi"
                and not isinstance(task, luigi.WrapperTask) and not getattr(task, "run_local", False))

    def _release(self, node: Node) -> None:
        self._running.pop(node.task.task_id, None)
        self.slots.release(node.task.task_id)
        if not node.needs:
            return
        self._used.subtract(dict(node.needs))
        for needs, waiting in self._blocked.items():
            while waiting and self._fits(needs):
                node = waiting.popleft()
                self._push(node)
                node.queued = True

    def _handle(self, result: TaskResult) -> None:
        node = self.nodes[result.task.task_id]
        if node.task.task_id not in self._running:
            return
        self._release(node)
        task = node.task
        if self.events_here and self.jobs.runs_as_job(task):
            local_on_engine.ended(task, result.status, result.explanation)
        if result.status == PENDING and result.new_deps:
            new = [luigi.task_register.load_task(module, name, params) for module, name, params in result.new_deps]
            for dep in new:
                self.add(dep)
            node.status = PENDING
            self.summary.add(task, PENDING, True)
            self._link(node, new)
            self._make_ready_if_due(node)
            return
        if result.status == DONE:
            node.status = DONE
            self.summary.add(task, DONE, True)
            for dependent in node.dependents:
                dependent.waiting_on -= 1
                self._make_ready_if_due(dependent)
            return
        node.failures += 1
        self.run_succeeded = False
        self.summary.add(task, FAILED, True)
        if self.jobs.runs_as_job(task) and active_profile() == "b2luigi":
            layout.print_b2luigi_failure(task)
        retry_count = int(getattr(task, "retry_count", None) or luigi.scheduler.scheduler().retry_count)
        if self._worker_config.keep_alive and node.failures < retry_count:
            node.status = FAILED
            self._sequence += 1
            heapq.heappush(self._retries, (time.time() + self._retry_delay, self._sequence, node))
            logger.warning("%s failed (%d of %d attempts); trying again in %g s", task, node.failures,
                           retry_count, self._retry_delay)
        else:
            node.status = FAILED
            self._lose(node)  # failed for good: dependents with a failure budget may run without it

    def result(self) -> Any:
        """luigi's run result, as ``luigi.build(detailed_summary=True)`` returns it."""
        return seam.run_result(self.summary, self.scheduling_succeeded and self.run_succeeded)
