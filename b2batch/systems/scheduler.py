"""The common part of batch systems driven by command-line tools (Slurm, SGE, HTCondor, LSF).

A subclass only builds commands and reads their output; this class runs them:

- :meth:`SchedulerSystem.submit_command` and :attr:`SchedulerSystem.job_id_formats` (``parse`` patterns of
  what the submit command prints, e.g. ``Job <{id:d}> is submitted to queue <{queue}>.``);
- :meth:`SchedulerSystem.status_command` / :meth:`SchedulerSystem.parse_status` for all jobs at once;
- :attr:`SchedulerSystem.state_map` from the scheduler's states to :class:`JobStatus` (an unknown state
  is logged once and treated as running: the wrapper's exit-code file still ends the job);
- :meth:`SchedulerSystem.cancel_command`.

A job the scheduler no longer lists is judged by the exit-code file its wrapper wrote; without one, it is
given ``output_wait_timeout`` seconds (shared file systems are slow), then it counts as lost.
"""

from __future__ import annotations

import getpass
import logging
import os
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import parse

from b2batch.engine import BatchSystem, Job, JobState, JobStatus, NativeState
from b2batch.engine.escalation import Request
from b2batch.engine.polling import JobMonitor
from b2batch.engine.outcome import written_exit_code, status_of_files
from b2batch.engine.usage import Usage
from b2batch.errors import (B2BatchError, BatchSystemError, CommandNotFoundError, RunStoppingError,
                            SchedulerCommandError, TransientCommandError)
from b2batch.systems import accounting, command_runner
from b2batch.systems.collect import AccountingCollector
from b2batch.systems.job_control import JobControl
from b2batch.systems.tagging import TaggedSubmissions, safe_name
from b2batch.jobscript.templating import render

logger = logging.getLogger(__name__)

#: A node name b2batch writes into an exclusion (anything else is left out: no quoting games in submit files).
_NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*\Z")


@dataclass
class _Watch:
    """What a system remembers of a job between two looks while the job is in a passing state."""

    job: Job
    left_queue_at: float | None = None
    completing_since: float | None = None
    history_checked_at_poll: int = -1


class SchedulerSystem(JobControl, TaggedSubmissions, BatchSystem):
    """A scheduler with command-line tools, in one run."""

    #: ``parse`` formats of a line the submit command prints, tried in order; fields: ``id`` (and for
    #: HTCondor ``cluster``/``proc``), see :meth:`job_id_of`.
    job_id_formats: ClassVar[tuple[str, ...]] = ("{id:d}",)
    #: The scheduler's states (as :meth:`parse_status` reports them) and what they mean to b2batch.
    state_map: ClassVar[dict[str, JobStatus]]
    #: Scheduler states in which the batch system, not the task, ended the job.
    scheduler_side_states: ClassVar[frozenset[str]] = frozenset()
    #: A shell expression giving an array element's 1-based index in the dispatch script (None: no arrays).
    array_index: ClassVar[str | None] = None
    #: How many job ids one status query of earlier jobs names at most (command lines have a length limit).
    lookup_chunk: ClassVar[int] = 5000
    #: Whether :meth:`status_command` lists all of the user's jobs whatever ids it is given (Slurm, SGE).
    lists_all_jobs: ClassVar[bool] = False
    #: How long a failed job may stay in a completing state before it counts as aborted without its final state.
    completing_grace: ClassVar[float] = 30.0
    #: About how long a job that has just ended takes to reach the scheduler's accounting: the first pause
    #: between the run's last accounting commands (:meth:`AccountingCollector.finish`; a shorter one on a slow
    #: flush only asks more often).
    accounting_lag: ClassVar[float] = 1.0

    def __init__(self, run: Any) -> None:
        super().__init__(run)
        config = run.config
        self.monitor = JobMonitor(self.name, self.query_states, (config.poll_interval, config.max_poll_interval))
        self._watching: dict[int, _Watch] = {}
        self._by_id: dict[str, Job] = {}  # the jobs followed, by job id
        self._warned_states: set[str] = set()
        #: What the scheduler said of the jobs of earlier runs: looked up once for all of them.
        self._earlier: dict[str, NativeState | None] = {}
        self._tagged = {}
        self._tagged_at = {}
        #: Seconds a scheduler command may take: the setting scheduler_call_timeout of the jobs last submitted.
        self.call_timeout: float = config.scheduler_call_timeout
        #: This system's scheduler commands: rate-limited, and counted in the run's record.
        self.calls = command_runner.SchedulerCalls(run.record.count_call, config.max_scheduler_calls_per_second)
        #: The accounting figures of ended jobs: one command per poll cycle for all of them (systems/collect.py).
        self.accounting = AccountingCollector(
            self.name, self.accounting_command if self.has_accounting else None, self.parse_accounting, run.record,
            self.calls, lambda: self.call_timeout, run.tag)

    # --- what a batch system implements ---------------------------------------------------------------

    def submit_command(self, job: Job) -> tuple[list[str], str | None]:
        """The command that submits ``job.files.wrapper``, and what to send to its stdin."""
        raise NotImplementedError

    @classmethod
    def status_command(cls, job_ids: list[str]) -> list[str]:
        """One command that reports the states of all ``job_ids`` (it may report more)."""
        raise NotImplementedError

    @classmethod
    def parse_status(cls, stdout: str) -> dict[str, NativeState]:
        """The states in the status command's output, by job id."""
        raise NotImplementedError

    @classmethod
    def cancel_command(cls, job_ids: list[str]) -> list[str]:
        raise NotImplementedError

    @property
    def has_accounting(self) -> bool:
        """Whether b2batch reads this scheduler's accounting (:mod:`b2batch.systems.accounting`)."""
        return self.name in accounting.BY_SYSTEM

    def accounting_command(self, job_ids: list[str]) -> list[str]:
        """One command that prints the accounting figures of all ``job_ids`` (jobs that ended)."""
        return accounting.BY_SYSTEM[self.name][0](job_ids, self.run.tag)

    def parse_accounting(self, stdout: str) -> dict[str, Usage]:
        """The figures in the accounting command's output, by job id."""
        return accounting.BY_SYSTEM[self.name][1](stdout)

    def close(self) -> None:
        """The run ends: the accounting figures of the jobs that ended last."""
        self.accounting.finish(step=self.accounting_lag)

    def ended_unpolled(self, job: Job) -> None:
        if job.job_id is not None:
            self.accounting.ended(str(job.job_id), job.key)

    def query_states(self, job_ids: list[str]) -> dict[str, NativeState]:
        """Run the status command for ``job_ids``; subclasses may add history look-ups."""
        return self.parse_status(command_runner.run(self.status_command(job_ids), timeout=self.call_timeout,
                                              calls=self.calls).stdout)

    def common_options(self, job: Job) -> list[str]:
        """Submit options that jobs must share to go into one array (e.g. resources, queue)."""
        return []

    def array_command(self, first: Job, common: list[str], dispatch: Path, folder: Path,
                      count: int) -> tuple[list[str], str | None]:
        """The command that submits ``dispatch`` as an array of ``count`` elements like ``first``."""
        raise NotImplementedError

    def array_job_ids(self, stdout: str, count: int) -> list[str]:
        """The ids of the elements of the array the submit command reported, in index order."""
        raise NotImplementedError

    def history(self, job: Job) -> NativeState | None:
        """What the scheduler's accounting says of a job that left the queue, or None if it has no record."""
        return None

    def final_once_exit_code_written(self) -> set[str]:
        """States in which a written exit-code file already means the job is over (e.g. COMPLETING)."""
        return set()

    def on_final_state(self, job: Job, native: NativeState, state: JobState) -> JobState:
        """Called once when the scheduler reports the job over (e.g. to clean up a job in an error state);
        the state to report."""
        return state

    def cause_of(self, native: NativeState) -> str:
        """Why a job in the final state ``native`` ended, as a word of :mod:`b2batch.engine.causes` ("": the
        answer says nothing more than its exit code)."""
        return ""

    # --- self-healing policies (b2batch.engine.healing) ------------------------------------------------

    def requested(self, job: Job) -> Request:
        """What ``job``'s settings ask this batch system for (memory, run time), as far as b2batch reads them."""
        return Request()

    def escalated(self, job: Job) -> Request | None:
        """The run's escalated request for ``job`` (None: its settings' own)."""
        healing = getattr(self.run, "healing", None)
        return healing.request_for(job) if healing is not None else None

    def excluded_nodes(self) -> tuple[str, ...]:
        """The nodes the run's later submissions to this system avoid (only names safe in any syntax)."""
        healing = getattr(self.run, "healing", None)
        nodes = healing.excluded(self.name) if healing is not None else ()
        return tuple(node for node in nodes if _NODE_NAME.match(node))

    def describe(self, native: NativeState) -> str:
        text = f"{self.name} state {native.state}"
        if native.reason:
            text += f" ({native.reason})"
        if native.exit_code is not None:
            text += f", exit code {native.exit_code}"
        return text

    def is_scheduler_side(self, native: NativeState) -> bool:
        """Whether the final state ``native`` is the batch system's fault (default: one of
        :attr:`scheduler_side_states`)."""
        return native.state in self.scheduler_side_states

    # --- submission -----------------------------------------------------------------------------------

    @staticmethod
    def user() -> str:
        return getpass.getuser()

    def job_name(self, job: Job) -> str:
        """The job's name: the job_name setting (default: the family) made safe (:func:`safe_name`), tagged with
        the run; a submission adds its own tag (:meth:`intend`)."""
        return f"{safe_name(job.config['job_name'] or job.family)}.b2b{self.run.tag}"

    def job_id_of(self, stdout: str) -> str | None:
        """The job id in the submit command's output (the first line that one of :attr:`job_id_formats`
        reads), or None."""
        for line in stdout.splitlines():
            for fmt in self.job_id_formats:
                found = parse.parse(fmt, line.strip())
                if found is not None:
                    return self.compose_id(found.named)
        return None

    @staticmethod
    def compose_id(fields: dict[str, Any]) -> str:
        return str(fields["id"])

    def groups(self, jobs: list[Job]) -> list[list[Job]]:
        """Jobs with the same name and options go together, as arrays of at most max_array_size."""
        if self.array_index is None:
            return [[job] for job in jobs]
        size = max(1, self.run.config.max_array_size)
        groups: dict[tuple[Any, ...], list[Job]] = {}
        for job in jobs:
            try:
                key = (self.job_name(job), tuple(self.common_options(job)))
            except B2BatchError:
                key = ("", (id(job),))  # a job whose options are wrong goes alone and fails alone
            groups.setdefault(key, []).append(job)
        return [group[i:i + size] for group in groups.values() for i in range(0, len(group), size)]

    def submit(self, group: list[Job]) -> None:
        first = group[0]
        self.call_timeout = first.config["scheduler_call_timeout"]
        self.monitor.intervals = (first.config["poll_interval"], first.config["max_poll_interval"])
        self.intend(group)  # before the scheduler may take them: a killed steering process leaves their tag behind
        if len(group) == 1:
            job = group[0]
            command, stdin = self.submit_command(job)
            done = self._run_submit(command, stdin, f"the wrapper {job.files.wrapper}")
            job_id = self.job_id_of(done.stdout)
            if job_id is None:
                raise SchedulerCommandError(command, 0, done.stdout, "", f"{self.name} accepted the job but "
                                            f"b2batch found no job id in its output.")
            self._track(job, job_id)
            self.monitor.invalidate()
            return
        first = group[0]
        folder = self.run.config.resolve(first.config["task_file_dir"]) / "arrays" / (
            f"{self.run.tag}-{os.getpid()}-{self.run.next_number()}")
        folder.mkdir(parents=True, exist_ok=True)
        dispatch = folder / "dispatch.sh"
        dispatch.write_text(render("array_dispatch.sh.j2", index_expression=self.array_index,
                                   wrappers=[job.files.wrapper for job in group]))
        dispatch.chmod(0o755)
        command, stdin = self.array_command(first, self.common_options(first), dispatch, folder, len(group))
        done = self._run_submit(command, stdin, f"the array's dispatch script {dispatch}")
        job_ids = self.array_job_ids(done.stdout, len(group))
        if len(job_ids) != len(group):
            raise SchedulerCommandError(command, 0, done.stdout, done.stderr,
                                        f"expected {len(group)} array elements, found {len(job_ids)} ids")
        for job, job_id in zip(group, job_ids):
            self._track(job, job_id)
        self.monitor.invalidate()

    def _track(self, job: Job, job_id: str) -> None:
        job.job_id = job_id
        self._by_id[job_id] = job
        self.monitor.track(job_id)

    def _run_submit(self, command: list[str], stdin: str | None, what: str) -> Any:
        """Run a submit command; a rejection becomes a BatchSystemError, transient errors stay as they are
        (the submitter tries again later)."""
        try:
            return command_runner.run(command, stdin=stdin, timeout=self.call_timeout, calls=self.calls)
        except TransientCommandError:
            raise
        except CommandNotFoundError as e:  # nothing to do with the job: no job of the run can go
            raise RunStoppingError(f"{self.name} cannot be used here: {e}") from e
        except SchedulerCommandError as e:
            raise BatchSystemError(f"{self.name} rejected the job: {e}\nCheck the task's settings for "
                                   f"{self.name} ({self.name}_settings) and {what}.") from e

    # --- following jobs -------------------------------------------------------------------------------

    def states(self, jobs: Iterable[Job]) -> dict[Job, JobState]:
        """One status query (when due) for all jobs; states only of the jobs whose answer changed, that are
        in a passing state (left the queue, completing), or all when the scheduler stopped answering. The
        work is that of the jobs judged, not of all jobs in flight."""
        monitor = self.monitor
        monitor.poll_if_due()
        changed = monitor.take_changed()
        unreachable = monitor.failures_since is not None and (
            monitor.unreachable_for() > self.run.config.scheduler_unreachable_timeout)
        if unreachable:
            candidates = list(jobs)
        else:
            chosen = {id(job): job for job in (self._by_id.get(i) for i in changed) if job is not None}
            chosen.update((key, watch.job) for key, watch in self._watching.items())
            candidates = list(chosen.values())
        answers = {job: self._state(job) for job in candidates}
        for job, answer in answers.items():
            if answer.final and job.job_id is not None:
                self.accounting.ended(job.job_id, job.key)
        self.accounting.collect(monitor.polls)
        return answers

    def _state(self, job: Job) -> JobState:
        assert job.job_id is not None
        monitor = self.monitor
        native = monitor.states.get(job.job_id)
        if monitor.failures_since is not None:
            limit = self.run.config.scheduler_unreachable_timeout
            if monitor.unreachable_for() > limit and written_exit_code(job.files) is None:
                return JobState(JobStatus.aborted, f"{self.name} did not answer status queries for {limit:g} s "
                                f"(setting scheduler_unreachable_timeout); last error: {monitor.last_error}. The "
                                f"job may still run: check it with the scheduler's own tools before running the "
                                f"workflow again.")
        if native is None:
            return self._state_outside_queue(job)
        status = self.state_map.get(native.state)
        if status is None:
            if native.state not in self._warned_states:
                self._warned_states.add(native.state)
                logger.warning("Job %s: unknown %s state %r, treated as running", job.job_id, self.name,
                               native.state)
            status = JobStatus.running
        if not status.final and native.state in self.final_once_exit_code_written():
            status = self._status_while_completing(job, status)
        else:
            self._watching.pop(id(job), None)
        if not status.final:
            if status == JobStatus.running and native.node:
                healing = getattr(self.run, "healing", None)
                if healing is not None:  # a node that runs a job of the run works (bad nodes: engine/bad_nodes.py)
                    healing.node_works(self.name, native.node)
            return JobState(status)
        reason = self.describe(native)
        side = reason if status == JobStatus.aborted and self.is_scheduler_side(native) else ""
        cause = (native.cause or self.cause_of(native)) if status == JobStatus.aborted else ""
        return self.on_final_state(job, native, JobState(status, reason, side, cause=cause, node=native.node))

    def _status_while_completing(self, job: Job, status: JobStatus) -> JobStatus:
        """A job in a state of :meth:`final_once_exit_code_written`: a job that succeeded is done at once; for
        a failed one the final state (e.g. Slurm's TIMEOUT or OUT_OF_MEMORY rather than COMPLETING) says why,
        so it is awaited for up to :attr:`completing_grace` seconds."""
        by_files = status_of_files(job.files)
        watch = self._watching.setdefault(id(job), _Watch(job))
        if by_files is None:
            return status
        if by_files == JobStatus.successful:
            return JobStatus.successful
        now = time.monotonic()
        if watch.completing_since is None:
            watch.completing_since = now
        return JobStatus.aborted if now - watch.completing_since > self.completing_grace else status

    def _state_outside_queue(self, job: Job) -> JobState:
        monitor = self.monitor
        by_files = status_of_files(job.files)
        if by_files is not None:
            return JobState(by_files)
        watch = self._watching.setdefault(id(job), _Watch(job))
        if monitor.polls == 0 or monitor.last_error is not None:
            return JobState(JobStatus.idle)  # no answer from the scheduler yet
        if watch.left_queue_at is None:
            watch.left_queue_at = time.monotonic()
        if watch.history_checked_at_poll != monitor.polls:
            watch.history_checked_at_poll = monitor.polls
            record = self.history(job)
            if record is not None and record.exit_code not in (0, None):
                return JobState(JobStatus.aborted, self.describe(record), cause=record.cause or self.cause_of(record),
                                node=record.node)
        if time.monotonic() - watch.left_queue_at < job.config["output_wait_timeout"]:
            return JobState(JobStatus.running)  # its exit-code file may still be on its way over a shared FS
        reason = (f"the job left {self.name}'s queue without writing its exit-code file {job.files.exit_code}: it "
                  f"was killed or lost by the batch system")
        return JobState(JobStatus.aborted, reason, scheduler_side=reason)

    def forget(self, job: Job) -> None:
        """Stop following a job, and forget what was last heard of it (it is no job to re-attach)."""
        self._watching.pop(id(job), None)
        if job.job_id is not None:
            self._by_id.pop(job.job_id, None)
            self.monitor.forget(job.job_id)
            self.monitor.seen.pop(job.job_id, None)
            self._earlier.pop(job.job_id, None)
