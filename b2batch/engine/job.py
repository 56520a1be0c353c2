"""A :class:`Job`: one unit of work for a batch system, with its files, its state and its outcome.

The unit of work is generic: a wrapper script (a command line with its environment) in a job folder, whose
exit code the wrapper writes to a file. A front-end makes jobs (a luigi task is one way to make one) and
gives each its settings, resolved (a :class:`~b2batch.engine.jobconfig.JobConfig`); the engine submits them, follows them, submits again those the
batch system lost, and hands back those that ended.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from b2batch.engine.files import JobFiles
from b2batch.engine.jobconfig import JobConfig
from b2batch.engine.outcome import COMMAND_NOT_FOUND, SETUP_FAILED, JobOutcome


@dataclass(eq=False, slots=True)
class Job:
    """One unit of work. Jobs compare and hash by identity. A run holds one per unit while it runs: in slots,
    no attribute beyond these."""

    #: Unique in the run (for luigi tasks: the task id); names the job's record.
    key: str
    #: How messages name the work, e.g. ``Simulate(seed=3)``.
    name: str
    #: The kind of work, for progress and summaries (for luigi tasks: the task family).
    family: str
    #: The batch system's name (the ``batch_system`` setting, resolved).
    system: str
    files: JobFiles
    #: The work's settings, resolved once by the front-end when it made the job (:mod:`b2batch.engine.jobconfig`):
    #: ``config["slurm_settings"]`` or ``config.slurm_settings``.
    config: JobConfig
    params: dict[str, str] = field(default_factory=dict)
    #: The front-end's own object (e.g. the luigi task); the engine never looks at it.
    payload: Any = None
    #: How a worker job (pilot or bundle) runs this unit in a child process: ``{"call": "module:function",
    #: "args": [...]}`` or ``{"command": [...]}`` (see :mod:`b2batch.engine.pilots.node_worker`); None: own jobs only.
    #: ``"job_files": ["spec", ...]`` adds the paths of those files of the job (:data:`~b2batch.engine.files.
    #: FILE_NAMES`) to the call's arguments, so that one unit dict may serve every job of a front-end.
    unit: dict[str, Any] | None = None
    #: What a worker loads once before it runs such units (e.g. the workflow script); part of what decides
    #: which units may share a worker.
    bootstrap: dict[str, Any] | None = None
    #: The unit's input file, ``(path, bytes)``, kept in memory until the unit goes out rather than written at
    #: once (a calls executor's pickled calls): a pilot's or bundle's unit that no later steering process follows
    #: gets it in its queue entry and needs no job folder at all (the runner hands it to the unit's function as
    #: ``inline``); a job of its own, or any other unit, gets the file (:meth:`write_inline`).
    inline: tuple[str, bytes] | None = None

    job_id: str | None = None
    resubmissions: int = 0
    #: How often the job was requeued after its work saved a checkpoint (no failure, not a resubmission).
    requeues: int = 0
    #: How the batch job ended (set once, by the engine, when the run hands the job back): the one object
    #: front-ends judge a job by.
    outcome: JobOutcome | None = None
    #: Whether the batch system never took the job (the outcome's reason says why).
    not_submitted: bool = False
    #: Whether the job followed is one an earlier steering process submitted (re-attached, not submitted here).
    earlier: bool = False
    #: Whether its front-end found the job of an earlier steering process ended (its exit code written) and hands
    #: the job in to run anew: nothing of the earlier job is followed, though its batch system may still know it
    #: (a pilot's log, a scheduler's history).
    earlier_ended: bool = False
    #: Where a batch system put the job, beyond its id, for a later steering process to find it (written
    #: into the journal; e.g. the work queue and unit name of a pilot).
    placement: dict[str, Any] = field(default_factory=dict)
    #: Whether its batch system wrote the journal already, before the job went anywhere a later steering
    #: process could not find it otherwise (a pilot's or bundle's unit: before it enters the queue).
    journal_written: bool = False
    #: Whether a later steering process may follow the job by its journal (``submission.json``). False for jobs
    #: that no later process looks for (a calls executor's: each executor has a work dir of its own): their
    #: journal is not looked for, and a unit of them in a pilot or bundle writes none (a job of its own still
    #: does: its batch job id is there for the user).
    journaled: bool = True
    #: The worker job that runs this unit, e.g. "pilot job 123 on slurm (log: ...)"; empty for own jobs.
    carrier: str = ""
    #: Units with the same (non-None) key have the same settings: what depends on them only is computed once
    #: per key (e.g. which worker jobs a unit may share). None: look them up for this unit.
    settings_key: Any = None
    #: Units with a bundle key share bundle jobs (``tasks_per_job``) only with units of the same key (e.g.
    #: b2luigi's parameter groups); None: with any unit of the same settings that has none.
    bundle: str | None = None
    #: When the unit ran in its worker job (epoch seconds, start and end), as the worker measured it.
    ran: tuple[float, float] | None = None
    #: What the unit's worker measured of its run (wall, CPU, peak RSS, host: :func:`b2batch.engine.usage.figures`),
    #: from its line in the worker's log; a job of its own has its wrapper's ``usage.json`` instead.
    measured: dict[str, Any] | None = None

    def __str__(self) -> str:
        return self.name

    def write_inline(self) -> None:
        """Make the job's folder and write its :attr:`inline` input to its file, if it is still in memory."""
        if self.inline is None:
            return
        path, data = self.inline
        self.files.make_folders()
        with open(path, "wb") as f:
            f.write(data)
        self.inline = None

    def failure_message(self, error: str = "") -> str:
        """Why the job failed, naming the work, its parameters, the exit code, the batch system's reason,
        ``error`` (the work's own), the logs and the end of stderr."""
        params = ", ".join(f"{k}={v}" for k, v in self.params.items()) or "no parameters"
        outcome = self.outcome if self.outcome is not None else JobOutcome.read(self.files)
        reason = outcome.reason
        if self.not_submitted:
            return f"Task {self.name} could not be submitted to {self.system}: {reason}"
        what = outcome.describe()
        if outcome.exit_code == COMMAND_NOT_FOUND:
            what += (f"; the command was not found on the node: check the setting 'executable' "
                     f"(now {self.config['executable']!r}) and env_script")
        elif outcome.exit_code == SETUP_FAILED and outcome.setup_failure:
            what += f"; the job could not set up its environment: {outcome.setup_failure}"
        where = f"job {self.job_id} on {self.system}" if self.job_id else f"its job on {self.system}"
        lines = [f"Task {self.family} ({params}) failed: {where} {what}."]
        if outcome.cancelled:  # on purpose: say so first, not as a failure of the work
            lines = [f"Task {self.family} ({params}) was {outcome.cancelled}"
                     + (f" while it ran in {self.carrier}." if self.carrier else
                        f" ({where})." if self.job_id else " before it ran.")]
            if outcome.exit_code == SETUP_FAILED and outcome.setup_failure:
                lines.append(f"The job could not set up its environment: {outcome.setup_failure}")
        if self.carrier:
            lines.append(f"Ran in {self.carrier}.")
        if reason:
            lines.append(f"Batch system: {reason}")
        if error:
            lines.append(f"Error: {error}")
        for name in ("stdout", "stderr"):
            part = self.files.log_part(name)  # a unit that wrote into its worker's logs: which bytes are its own
            lines.append(f"{name}: {part[0]} (its part: bytes {part[1]} to {part[2]})" if part else
                         f"{name}: {getattr(self.files, name)}")
        tail = self.files.stderr_tail()
        if tail:
            lines.append("Last lines of stderr:\n" + tail)
        return "\n".join(lines)
