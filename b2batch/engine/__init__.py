"""The engine: runs of jobs on batch systems, knowing nothing of luigi.

- :class:`Run`: one run; owns its batch systems, their submitters and monitors, its live jobs and record.
- :class:`BatchSystem`: one batch system in one run (submit groups, one status query, bulk cancel).
- :class:`Job`: one unit of work with its files, state, resubmission count and outcome.
- :class:`JobState` / :class:`JobStatus`: what a status query answers.
- :class:`JobOutcome`: how a job ended (exit code, signal, cause, logs), read once by the engine.
"""

from b2batch.engine.files import JobFiles
from b2batch.engine.job import Job
from b2batch.engine.outcome import JobOutcome, last_outcome
from b2batch.engine.record import JobRecord, RunRecord
from b2batch.engine.run import Run
from b2batch.engine.jobstate import JobState, JobStatus, NativeState
from b2batch.engine.system import BatchSystem

__all__ = ["BatchSystem", "Job", "JobFiles", "JobOutcome", "JobRecord", "JobState", "JobStatus", "NativeState",
           "Run", "RunRecord", "last_outcome"]
