"""Accounting in bulk: one accounting command per poll cycle for all jobs that ended since the last.

A :class:`SchedulerSystem` tells its :class:`AccountingCollector` of every job of the run's record that ended
(:meth:`AccountingCollector.ended`), and after each status query lets it run (:meth:`AccountingCollector.
collect`): at most one accounting command per poll cycle and per :attr:`AccountingCollector.interval` seconds,
naming every job that ended and has no figures yet. What it reads goes into the run's record (:meth:`RunRecord.account`), beside the wrapper's own figures.

Accounting lags a little behind the queue (slurmdbd, SGE's accounting file flush): a job missing from an
answer is asked for again in the next cycles, for up to :attr:`AccountingCollector.patience` seconds, then
keeps the wrapper's figures. When the command is missing or fails, or answers nothing at all for that long,
the run logs ONE line and uses the wrapper's figures from then on; it never fails a job.

At the run's end (:meth:`AccountingCollector.finish`) the run waits a few seconds for the figures of its own task
jobs (the end summary's efficiency lines need them), not for its pilot and bundle jobs: they all end with the
run, their figures go into the report only, and the scheduler has them a second or more later (slurmdbd). Those
are handed over (:attr:`RunRecord.accounting_pending`) for the report to complete after the run
(:mod:`b2batch.command.late_accounting`).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from b2batch.engine.usage import Usage
from b2batch.errors import SchedulerCommandError
from b2batch.systems import command_runner

logger = logging.getLogger(__name__)

#: An accounting command's error that only says it has no record of the jobs yet (qacct: "job name ... not
#: found"): they are asked again.
_NO_RECORD_YET = re.compile(r"\bnot found\b")

#: ``command(job_ids)`` -> argument list; ``parse(stdout)`` -> figures by job id.
CommandBuilder = Callable[[list[str]], list[str]]
Parser = Callable[[str], dict[str, Usage]]


@dataclass
class _Pending:
    key: str
    since: float


class AccountingCollector:
    """The jobs of one batch system in one run that ended and await their accounting figures."""

    #: Seconds a job is asked for before it keeps the wrapper's figures alone.
    patience: float = 60.0
    #: Seconds between two accounting commands at least (figures are for the end of the run, not urgent): on a
    #: large run, one command per this many seconds asks for all the jobs that ended since the last.
    interval: float = 10.0
    #: Most job ids one command names (command lines have a length limit); the rest waits for the next cycle.
    chunk: int = 2000

    def __init__(self, system: str, build: CommandBuilder | None, parse: Parser | None, record: object,
                 calls: command_runner.SchedulerCalls | None, timeout: Callable[[], float], tag: str = "") -> None:
        self.system = system
        #: The run's tag (SGE's accounting names the run's jobs by it).
        self.tag = tag
        self.build = build
        self.parse = parse
        self.record = record
        self.calls = calls
        self.timeout = timeout
        self.pending: dict[str, _Pending] = {}
        #: Why accounting is off for the rest of the run ("" while it works).
        self.off = "" if build is not None and parse is not None else "not available"
        self.commands = 0
        self._answered = False
        self._cycle = -1
        self._asked_at = float("-inf")

    def ended(self, job_id: str, key: str) -> None:
        """The job ``job_id`` of the record's ``key`` ended: ask for its figures in the next cycle."""
        if not self.off and (key in getattr(self.record, "jobs", {}) or key in getattr(self.record, "worker_jobs", {})):
            self.pending.setdefault(job_id, _Pending(key, time.monotonic()))

    def collect(self, cycle: int) -> None:
        """Run the accounting command once in poll cycle ``cycle`` (a second call in the same cycle does
        nothing) for the jobs pending."""
        if self.off or not self.pending or cycle == self._cycle or time.monotonic() - self._asked_at < self.interval:
            return
        self._cycle = cycle
        self._ask(list(self.pending)[:self.chunk])

    def finish(self, wait: float = 5.0, step: float = 1.0) -> None:
        """The run ends: ask for the task jobs still pending, a few times within ``wait`` seconds: ``step``
        seconds after the first command, then twice as long each time up to a second (a job that has just ended
        reaches the accounting a moment later; how much later is the scheduler's,
        :attr:`SchedulerSystem.accounting_lag`). Pilot and bundle jobs are asked with them; those still pending
        when no task job is are handed over to the report (:attr:`RunRecord.accounting_pending`) unasked."""
        deadline = time.monotonic() + wait
        while self._tasks_pending() and not self.off:
            self._ask(list(self.pending)[:self.chunk])
            if not self._tasks_pending() or time.monotonic() > deadline:
                break
            time.sleep(step)
            step = max(step, min(2 * step, 1.0))
        if self.pending and not self.off:
            self._hand_over()
        self.pending.clear()

    def _tasks_pending(self) -> bool:
        """Whether a job of a task (not a pilot or bundle job) still waits for its figures."""
        jobs = getattr(self.record, "jobs", {})
        return any(p.key in jobs for p in self.pending.values())

    def _hand_over(self) -> None:
        """The pilot and bundle jobs still pending, for the report to complete after the run."""
        handed = getattr(self.record, "accounting_pending", None)
        if handed is None:
            return
        entry = handed.setdefault(self.system, {"tag": self.tag, "jobs": {}})
        entry["jobs"].update({job_id: p.key for job_id, p in self.pending.items()})

    def _ask(self, job_ids: list[str]) -> None:
        assert self.build is not None and self.parse is not None
        self._asked_at = time.monotonic()
        found = ask(self.build(job_ids), self.parse, self.timeout(), self.calls)
        if isinstance(found, str):
            self._give_up(found)
            return
        self.commands += 1
        if found:
            self.record.accounting.setdefault(self.system, self.build(job_ids[:1])[0])  # type: ignore[attr-defined]
        now = time.monotonic()
        for job_id in job_ids:
            usage = found.get(job_id)
            pending = self.pending[job_id]
            if usage is not None:
                self._answered = True
                del self.pending[job_id]
                self.record.account(pending.key, job_id, usage)  # type: ignore[attr-defined]
            elif now - pending.since > self.patience:
                del self.pending[job_id]
                if not self._answered:
                    self._give_up(f"it had no record of job {job_id} after {self.patience:g} s")
                    return

    def _give_up(self, why: str) -> None:
        self.off = why
        getattr(self.record, "accounting", {})[self.system] = f"unavailable: {why}"
        self.pending.clear()
        logger.warning("%s accounting is unavailable (%s): the run's figures are the job wrappers' own (wall, "
                       "CPU, peak memory, host)", self.system, why)


def ask(command: list[str], parse: Parser, timeout: float,
        calls: command_runner.SchedulerCalls | None = None) -> dict[str, Usage] | str:
    """Run one accounting ``command``: the figures it answers, by job id (none when it has no record of the jobs
    yet, e.g. SGE's qacct "not found"), or why it could not tell (the command failed or its answer was unreadable).
    The run's collector and the report's late accounting (:mod:`b2batch.command.late_accounting`) both ask so."""
    try:
        return parse(command_runner.run(command, timeout=timeout, calls=calls).stdout)
    except SchedulerCommandError as e:
        said = (e.stderr.strip() or e.stdout.strip()).splitlines()
        if e.returncode is not None and said and _NO_RECORD_YET.search(said[-1]):
            return {}  # the jobs ended, their accounting is not written yet
        code = "timed out" if e.returncode is None else f"exit {e.returncode}"
        return f"{e.command[0]} failed ({code}){': ' + said[-1] if said else ''}"
    except Exception as e:  # noqa: BLE001 - an unreadable answer must not fail the run
        return f"its answer could not be read ({e!r})"
