"""The common part of batch systems driven by command-line tools (Slurm, SGE, HTCondor, LSF).

A subclass only builds commands and parses their output; this class runs them:

- :meth:`SchedulerProcess.submit_command` and a named-group regex :attr:`job_id_pattern` for the job id;
- :meth:`SchedulerProcess.status_command` / :meth:`SchedulerProcess.parse_status` for all jobs at once;
- :attr:`SchedulerProcess.state_map` from the scheduler's states to :class:`JobStatus` (an unknown state
  is logged once and treated as running: the wrapper's exit-code file still ends the job);
- :meth:`SchedulerProcess.cancel_command`.

A job the scheduler no longer lists is judged by the exit-code file its wrapper wrote; without one, it is
given ``output_wait_timeout`` seconds (shared file systems are slow), then it counts as lost.
"""

from __future__ import annotations

import getpass
import logging
import os
import re
import time
import uuid
from pathlib import Path
from typing import Any, ClassVar

from b2batch import commands, paths
from b2batch.errors import B2BatchError, BatchSystemError, SchedulerCommandError
from b2batch.monitor import JobMonitor, NativeState
from b2batch.process import BatchProcess, JobStatus
from b2batch.settings import get_setting
from b2batch.wrapper import render

logger = logging.getLogger(__name__)

#: Tags the jobs of one steering process (part of each job's name).
RUN_TAG = uuid.uuid4().hex[:8]


class SchedulerProcess(BatchProcess):
    """One task as one job of a scheduler with command-line tools."""

    #: A regex with a group named ``id`` that finds the job id in the submit command's output.
    job_id_pattern: ClassVar[re.Pattern[str]]
    #: The scheduler's states (as :meth:`parse_status` reports them) and what they mean to b2batch.
    state_map: ClassVar[dict[str, JobStatus]]
    #: The monitor shared by all jobs of this batch system.
    _monitors: ClassVar[dict[type, JobMonitor]] = {}
    _warned_states: ClassVar[set[str]] = set()
    _array_counter: ClassVar[int] = 0

    # --- what a batch system implements ---------------------------------------------------------------

    def submit_command(self) -> tuple[list[str], str | None]:
        """The command that submits :attr:`job_files` ``.wrapper``, and what to send to its stdin."""
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

    @classmethod
    def query_states(cls, job_ids: list[str]) -> dict[str, NativeState]:
        """Run the status command for ``job_ids``; subclasses may add history look-ups."""
        return cls.parse_status(commands.run(cls.status_command(job_ids)).stdout)

    #: A shell expression giving an array element's 1-based index in the dispatch script (None: no arrays).
    array_index: ClassVar[str | None] = None

    def common_options(self) -> list[str]:
        """Submit options that jobs must share to go into one array (e.g. resources, queue)."""
        return []

    @classmethod
    def array_command(cls, name: str, common: list[str], dispatch: Path, folder: Path,
                      count: int) -> tuple[list[str], str | None]:
        """The command that submits ``dispatch`` as an array of ``count`` elements."""
        raise NotImplementedError

    @classmethod
    def array_job_ids(cls, stdout: str, count: int) -> list[str]:
        """The ids of the elements of the array the submit command reported, in index order."""
        raise NotImplementedError

    # --- bulk submission -------------------------------------------------------------------------------

    @classmethod
    def groups_for_submission(cls, jobs: list[Any]) -> list[list[Any]]:
        """Jobs with the same name and options go together, as arrays of at most max_array_size."""
        if cls.array_index is None:
            return [[job] for job in jobs]
        size = max(1, int(get_setting("max_array_size")))
        groups: dict[tuple[Any, ...], list[Any]] = {}
        for job in jobs:
            try:
                key = (job.job_name(), tuple(job.common_options()))
            except B2BatchError:
                key = ("", (id(job),))  # a job whose options are wrong goes alone and fails alone
            groups.setdefault(key, []).append(job)
        return [group[i:i + size] for group in groups.values() for i in range(0, len(group), size)]

    @classmethod
    def submit_group(cls, group: list[Any]) -> None:
        if len(group) == 1:
            group[0].start_job()
            return
        first = group[0]
        cls._array_counter += 1
        folder = paths.resolve(get_setting("task_file_dir", task=first.task)) / "arrays" / (
            f"{RUN_TAG}-{os.getpid()}-{cls._array_counter}")
        folder.mkdir(parents=True, exist_ok=True)
        dispatch = folder / "dispatch.sh"
        dispatch.write_text(render("array_dispatch.sh.j2", index_expression=cls.array_index,
                                   wrappers=[job.job_files.wrapper for job in group]))
        dispatch.chmod(0o755)
        command, stdin = cls.array_command(first.job_name(), first.common_options(), dispatch, folder, len(group))
        done = cls._run_submit(command, stdin, f"the array's dispatch script {dispatch}")
        job_ids = cls.array_job_ids(done.stdout, len(group))
        if len(job_ids) != len(group):
            raise SchedulerCommandError(command, 0, done.stdout, done.stderr,
                                        f"expected {len(group)} array elements, found {len(job_ids)} ids")
        monitor = cls.monitor()
        for job, job_id in zip(group, job_ids):
            job.job_id = job_id
            monitor.track(job_id)
        monitor.invalidate()

    # --- shared ----------------------------------------------------------------------------------------

    @classmethod
    def monitor(cls) -> JobMonitor:
        if cls not in cls._monitors:
            cls._monitors[cls] = JobMonitor(cls.system_name, cls.query_states)
        return cls._monitors[cls]

    @staticmethod
    def user() -> str:
        return getpass.getuser()

    def job_name(self) -> str:
        """The job's name: the job_name setting (default: the task family), tagged with the run."""
        name = get_setting("job_name", task=self.task) or self.task.task_family
        return f"{name}.b2b{RUN_TAG}"

    def parse_job_id(self, stdout: str, command: list[str]) -> str:
        match = self.job_id_pattern.search(stdout)
        if not match:
            raise SchedulerCommandError(command, 0, stdout, "", f"{self.system_name} accepted the job but b2batch "
                                        f"found no job id in its output.")
        return match.group("id")

    def start_job(self) -> None:
        command, stdin = self.submit_command()
        done = self._run_submit(command, stdin, f"the wrapper {self.job_files.wrapper}")
        self.job_id = self.parse_job_id(done.stdout, command)
        monitor = self.monitor()
        monitor.track(self.job_id)
        monitor.invalidate()

    @classmethod
    def _run_submit(cls, command: list[str], stdin: str | None, what: str) -> Any:
        """Run a submit command; a rejection becomes a BatchSystemError, transient errors stay as they are
        (the submitter tries again later)."""
        try:
            return commands.run(command, stdin=stdin)
        except commands.TransientCommandError:
            raise
        except SchedulerCommandError as e:
            raise BatchSystemError(f"{cls.system_name} rejected the job: {e}\nCheck the task's settings for "
                                   f"{cls.system_name} ({cls.system_name}_settings) and {what}.") from e

    #: Scheduler states in which the batch system, not the task, ended the job.
    scheduler_side_states: ClassVar[frozenset[str]] = frozenset()

    def scheduler_side_failure(self) -> str:
        return self._scheduler_side

    def is_scheduler_side(self, native: NativeState) -> bool:
        """Whether the final state ``native`` is the batch system's fault (default: one of
        :attr:`scheduler_side_states`)."""
        return native.state in self.scheduler_side_states

    def attach(self, submission: dict[str, Any]) -> bool:
        job_id = str(submission.get("job_id"))
        monitor = self.monitor()
        native = monitor.states.get(job_id) or monitor.seen.get(job_id) or self._earlier_state(job_id)
        status = self.state_map.get(native.state) if native else None
        if status is None or status.final:
            return False
        self.job_id = job_id
        monitor.track(job_id)
        return True

    #: How many job ids one status query of earlier jobs names at most (command lines have a length limit).
    lookup_chunk: ClassVar[int] = 5000
    #: Whether :meth:`status_command` lists all of the user's jobs whatever ids it is given (Slurm, SGE).
    lists_all_jobs: ClassVar[bool] = False
    #: What the scheduler said of the jobs of earlier runs, by batch system: looked up once for all of them.
    _earlier: ClassVar[dict[type, dict[str, NativeState | None]]] = {}

    def _earlier_state(self, job_id: str) -> NativeState | None:
        """The scheduler's state of a job of an earlier run (None: it does not know the job). The first
        task to re-attach asks for the jobs of every unfinished journal in its task file folder at once, so a
        restarted run of N tasks costs a few status queries, not N. Answers may be old by the time a task
        re-attaches: a job that ended since is then found over by the usual status queries."""
        known = self._earlier.setdefault(type(self), {})
        if job_id not in known:
            ids = list(dict.fromkeys([job_id, *self.job_files.unfinished_submissions(self.system_name)]))
            ids = [i for i in ids if i not in known]
            chunks = [ids] if self.lists_all_jobs else [ids[k:k + self.lookup_chunk]
                                                         for k in range(0, len(ids), self.lookup_chunk)]
            for chunk in chunks:
                try:
                    states = self.query_states(chunk)
                except SchedulerCommandError as e:
                    logger.warning("Job %s: could not ask %s about the jobs of an earlier run: %s", job_id,
                                   self.system_name, e)
                    return None
                known.update({i: states.get(i) for i in chunk})
        return known.get(job_id)

    def get_job_status(self) -> JobStatus:
        assert self.job_id is not None
        monitor = self.monitor()
        native = monitor.state(self.job_id)
        # luigi asks every running job about once a second: the exit-code file is read only when it can
        # change the answer (the job left the queue, is completing, or the scheduler does not answer).
        if monitor.failures_since is not None:
            limit = float(get_setting("scheduler_unreachable_timeout"))
            if monitor.unreachable_for() > limit and self.job_files.read_exit_code() is None:
                monitor.forget(self.job_id)
                self._reason = (f"{self.system_name} did not answer status queries for {limit:g} s "
                                f"(setting scheduler_unreachable_timeout); last error: {monitor.last_error}. The "
                                f"job may still run: check it with the scheduler's own tools before running the "
                                f"workflow again.")
                return JobStatus.aborted
        if native is None:
            return self._status_outside_queue(self.job_files.read_exit_code(), monitor)
        status = self.state_map.get(native.state)
        if status is None:
            if native.state not in self._warned_states:
                self._warned_states.add(native.state)
                logger.warning("Job %s: unknown %s state %r, treated as running", self.job_id, self.system_name,
                               native.state)
            status = JobStatus.running
        if not status.final and native.state in self.final_once_exit_code_written():
            status = self._status_while_completing(status)
        if status.final:
            monitor.forget(self.job_id)
            self._reason = self._describe(native)
            if status == JobStatus.aborted and self.is_scheduler_side(native):
                self._scheduler_side = self._reason
            self.on_final_state(native, status)
        return status

    def on_final_state(self, native: NativeState, status: JobStatus) -> None:
        """Called once when the scheduler reports the job over (e.g. to clean up a job in an error state)."""

    def history(self) -> NativeState | None:
        """What the scheduler's accounting says of a job that left the queue, or None if it has no record."""
        return None

    def final_once_exit_code_written(self) -> set[str]:
        """States in which a written exit-code file already means the job is over (e.g. COMPLETING)."""
        return set()

    #: How long a failed job may stay in a completing state before it counts as aborted without its final state.
    completing_grace: ClassVar[float] = 30.0

    def _status_while_completing(self, status: JobStatus) -> JobStatus:
        """A job in a state of :meth:`final_once_exit_code_written`: a job that succeeded is done at once; for
        a failed one the final state (e.g. Slurm's TIMEOUT or OUT_OF_MEMORY rather than COMPLETING) says why,
        so it is awaited for up to :attr:`completing_grace` seconds."""
        exit_code = self.job_files.read_exit_code()
        if exit_code is None:
            return status
        if exit_code == 0:
            return JobStatus.successful
        now = time.monotonic()
        if self._completing_since is None:
            self._completing_since = now
        return JobStatus.aborted if now - self._completing_since > self.completing_grace else status

    def _status_outside_queue(self, exit_code: int | None, monitor: JobMonitor) -> JobStatus:
        assert self.job_id is not None and self.submitted_at is not None
        if exit_code is not None:
            monitor.forget(self.job_id)
            return JobStatus.successful if exit_code == 0 else JobStatus.aborted
        if monitor.polls == 0 or monitor.last_error is not None:
            return JobStatus.idle  # no answer from the scheduler yet
        if self._left_queue_at is None:
            self._left_queue_at = time.monotonic()
        if self._history_checked_at_poll != monitor.polls:
            self._history_checked_at_poll = monitor.polls
            record = self.history()
            if record is not None and record.exit_code not in (0, None):
                monitor.forget(self.job_id)
                self._reason = self._describe(record)
                return JobStatus.aborted
        if time.monotonic() - self._left_queue_at < float(get_setting("output_wait_timeout", task=self.task)):
            return JobStatus.running  # its exit-code file may still be on its way over a shared file system
        monitor.forget(self.job_id)
        self._reason = (f"the job left {self.system_name}'s queue without writing its exit-code file "
                        f"{self.job_files.exit_code}: it was killed or lost by the batch system")
        self._scheduler_side = self._reason
        return JobStatus.aborted

    def _describe(self, native: NativeState) -> str:
        text = f"{self.system_name} state {native.state}"
        if native.reason:
            text += f" ({native.reason})"
        if native.exit_code is not None:
            text += f", exit code {native.exit_code}"
        return text

    def failure_reason(self) -> str:
        return getattr(self, "_reason", "")

    @classmethod
    def kill_jobs(cls, jobs: list[Any]) -> None:
        ids = [job.job_id for job in jobs if job.job_id is not None]
        for start in range(0, len(ids), 500):
            chunk = ids[start:start + 500]
            try:
                commands.run_with_retries(cls.cancel_command(chunk), attempts=3)
            except SchedulerCommandError as e:
                logger.warning("Could not cancel %d %s job(s): %s", len(chunk), cls.system_name, e)
            for job_id in chunk:
                cls._forget(job_id)

    def kill_job(self) -> None:
        if self.job_id is None:
            return
        try:
            commands.run_with_retries(self.cancel_command([self.job_id]), attempts=3)
        except SchedulerCommandError as e:
            logger.warning("Job %s: could not cancel it: %s", self.job_id, e)
        self._forget(self.job_id)

    @classmethod
    def _forget(cls, job_id: str) -> None:
        """Stop following a cancelled job, and forget what was last heard of it (it is no job to re-attach)."""
        monitor = cls.monitor()
        monitor.forget(job_id)
        monitor.seen.pop(job_id, None)
        cls._earlier.get(cls, {}).pop(job_id, None)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._left_queue_at: float | None = None
        self._completing_since: float | None = None
        self._history_checked_at_poll = -1
        self._reason = ""
        self._scheduler_side = ""
