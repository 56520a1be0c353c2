"""What a scheduler system does to jobs beyond submitting and following its own: it re-attaches to the jobs of an
earlier steering process, cancels jobs, and wakes a closing run's pilots.

:class:`JobControl` is a part of :class:`b2batch.systems.scheduler.SchedulerSystem` (its status query, cancel and
continue commands, monitor and rate-limited calls are the system's own):

- **re-attaching** (:meth:`JobControl.attach`): a restarted run follows the jobs of an earlier one that the
  scheduler still has, or that ended well since, instead of submitting their work again; the first job to
  re-attach asks for all the earlier jobs of its task file folder at once;
- **cancelling** (:meth:`JobControl.cancel`): as few commands as the command line's length allows, retried, a
  job that ended meanwhile no error;
- **waking pilots to end** (:meth:`JobControl.wake_to_end`): one command that sends SIGCONT to the pilots'
  processes where the scheduler has one (Slurm, LSF), so that a pilot in its idle pause (up to a second) sees at
  once that it is to stop.
"""

from __future__ import annotations

import logging
from typing import Any

from b2batch.engine import Job, NativeState
from b2batch.engine.outcome import written_exit_code
from b2batch.errors import B2BatchError, SchedulerCommandError
from b2batch.systems import command_runner

logger = logging.getLogger(__name__)


class JobControl:
    """Re-attaching, cancelling and waking: the part of a scheduler system that reaches jobs it did not just
    submit, or stops them."""

    # (the scheduler system's own: its commands, monitor, calls and what it follows)
    name: str
    run: Any
    monitor: Any
    calls: Any
    call_timeout: float
    state_map: Any
    lists_all_jobs: bool
    lookup_chunk: int
    _earlier: dict[str, NativeState | None]

    @classmethod
    def continue_command(cls, job_ids: list[str]) -> list[str] | None:
        """One command that sends SIGCONT to every process of the running jobs ``job_ids`` (a pilot in its idle
        pause ends the pause; a running process ignores it), or None where the scheduler has none."""
        return None

    def wake_to_end(self, jobs: list[Job]) -> None:
        """Pilots told to end see it at once rather than after their idle pause (up to a second on a cluster):
        one :meth:`continue_command` for all, where the scheduler has one. A pilot that ended meanwhile makes
        the command fail: that is fine, and nothing else depends on it. (Only at the run's end: SIGCONT would
        also resume a pilot the scheduler suspended, which is harmless only once the pilot is to end; new units
        wait for the pilots' pause.)"""
        ids = [str(job.job_id) for job in jobs if job.job_id is not None]
        for start in range(0, len(ids), self.lookup_chunk):
            command = self.continue_command(ids[start:start + self.lookup_chunk])
            if command is None:
                return
            try:
                command_runner.run(command, timeout=self.call_timeout, check=False, calls=self.calls)
            except B2BatchError as e:  # (missing, timed out): the pilots see it after their pause
                logger.debug("Could not wake the pilots to end: %s", e)

    # --- earlier runs ---------------------------------------------------------------------------------

    def attach(self, job: Job, journal: dict[str, Any]) -> bool:
        job_id = str(journal.get("job_id"))
        monitor = self.monitor
        native = monitor.states.get(job_id) or monitor.seen.get(job_id) or self._earlier_state(job, job_id)
        # A job that ended successfully since the front-end looked (its exit code is there now) is followed
        # too, also when the scheduler no longer lists it (Grid Engine forgets an ended job at once): the next
        # poll reports its end, so it is not submitted again. Others that ended, or that it lists in a state
        # unknown here, go again.
        ended_well = written_exit_code(job.files) == 0
        if native is None:
            followed = ended_well
        else:
            status = self.state_map.get(native.state)
            followed = status is not None and (not status.final or ended_well)
        if not followed:
            return False
        self._track(job, job_id)
        return True

    def _earlier_state(self, job: Job, job_id: str) -> NativeState | None:
        """The scheduler's state of a job of an earlier run (None: it does not know the job). The first job to
        re-attach asks for the jobs of every unfinished journal in its task file folder at once, so a
        restarted run of N jobs costs a few status queries, not N. Answers may be old by the time a job
        re-attaches: a job that ended since is then found over by the usual status queries."""
        known = self._earlier
        if job_id not in known:
            task_file_dir = self.run.config.resolve(job.config["task_file_dir"] or ".")
            ids = list(dict.fromkeys([job_id, *job.files.unfinished_submissions(self.name, task_file_dir)]))
            ids = [i for i in ids if i not in known]
            chunks = [ids] if self.lists_all_jobs else [ids[k:k + self.lookup_chunk]
                                                         for k in range(0, len(ids), self.lookup_chunk)]
            for chunk in chunks:
                try:
                    states = self.query_states(chunk)
                except SchedulerCommandError as e:
                    logger.warning("Job %s: could not ask %s about the jobs of an earlier run: %s", job_id,
                                   self.name, e)
                    return None
                known.update({i: states.get(i) for i in chunk})
        return known.get(job_id)

    # --- cancelling -----------------------------------------------------------------------------------

    def cancel_commands(self, job_ids: list[str]) -> list[list[str]]:
        """The commands that cancel ``job_ids``: as few as the command line's length allows."""
        return [self.cancel_command(job_ids[start:start + 500]) for start in range(0, len(job_ids), 500)]

    def recall(self, job_id: str, journal: dict[str, Any]) -> None:
        """Note what the journal of job ``job_id`` says of where it is, beyond its id (for ``b2batch status``
        and ``cancel``, which ask about jobs of steering processes that may be gone)."""

    def cancel(self, jobs: list[Job]) -> None:
        ids = [job.job_id for job in jobs if job.job_id is not None]
        for command in self.cancel_commands(ids):
            try:
                command_runner.run_with_retries(command, attempts=3, timeout=self.call_timeout, calls=self.calls)
            except SchedulerCommandError as e:
                if self._any_active(command_ids := [i for i in ids if i in command]):
                    logger.warning("Could not cancel %s job(s) with %s: %s", self.name, command[0], e)
                else:  # they ended meanwhile (bkill: "Job has already finished"): nothing to cancel
                    logger.debug("%s: %s found the jobs ended already: %s", self.name, command[0], command_ids)
        for job in jobs:
            self.forget(job)

    def _any_active(self, job_ids: list[str]) -> bool:
        """Whether any of ``job_ids`` is still queued or running (True when the scheduler cannot be asked)."""
        try:
            states = self.query_states(job_ids)
        except Exception:  # noqa: BLE001 - in doubt, the failed cancel is worth a warning
            return True
        for native in states.values():
            status = self.state_map.get(native.state)
            if status is None or not status.final:
                return True
        return False
