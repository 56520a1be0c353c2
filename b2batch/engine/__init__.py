"""The engine: runs of jobs on batch systems, knowing nothing of luigi.

- :class:`Run`: one run; owns its batch systems, their submitters and monitors, its live jobs and record.
- :class:`BatchSystem`: one batch system in one run (submit groups, one status query, bulk cancel).
- :class:`Job`: one unit of work with its files, state, resubmission count and outcome.
- :class:`JobState` / :class:`JobStatus`: what a status query answers.
- :class:`JobOutcome`: how a job ended (exit code, signal, cause, logs), read once by the engine.
"""

from __future__ import annotations

from b2batch.lazy_names import lazy_names

#: Each public name and its module, imported when first used: a pilot or a job on a node imports the engine's
#: leaf modules it needs (``b2batch.engine.pilots.node_worker``, ``b2batch.engine.files``) without the steering
#: side's run, systems and job-script templates (~0.1-0.2 s of start-up per pilot).
_MODULE_OF = {"JobFiles": "b2batch.engine.files", "Job": "b2batch.engine.job", "JobOutcome": "b2batch.engine.outcome",
              "last_outcome": "b2batch.engine.outcome", "JobRecord": "b2batch.engine.record",
              "RunRecord": "b2batch.engine.record", "Run": "b2batch.engine.run", "JobState": "b2batch.engine.jobstate",
              "JobStatus": "b2batch.engine.jobstate", "NativeState": "b2batch.engine.jobstate",
              "BatchSystem": "b2batch.engine.system"}

__all__ = ["BatchSystem", "Job", "JobFiles", "JobOutcome", "JobRecord", "JobState", "JobStatus", "NativeState",
           "Run", "RunRecord", "last_outcome"]


__getattr__, __dir__ = lazy_names(__name__, globals(), _MODULE_OF)
