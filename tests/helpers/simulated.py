"""A batch system in memory for engine tests, and a job to hand it: no scheduler, no process."""

from __future__ import annotations

from pathlib import Path

from b2batch.engine.jobconfig import NO_SETTINGS
from b2batch.engine import BatchSystem, Job, JobFiles, JobState, JobStatus, Run


class Simulated(BatchSystem):
    """A batch system in memory: jobs end when the test says, with one status query per poll."""

    name = "simulated"

    def __init__(self, run: Run) -> None:
        super().__init__(run)
        self.answers: dict[str, JobState] = {}
        self.changed: set[str] = set()
        self.submissions: list[int] = []
        self.queries = 0
        self.judged = 0
        self.cancelled: list[str] = []
        self.counter = 0

    def groups(self, jobs: list[Job]) -> list[list[Job]]:
        return [jobs]  # one array

    def submit(self, group: list[Job]) -> None:
        self.submissions.append(len(group))
        for job in group:
            self.counter += 1
            job.job_id = str(self.counter)
            self.answers[job.job_id] = JobState(JobStatus.idle)

    def end(self, job: Job, state: JobState, exit_code: int) -> None:
        job.files.exit_code.write_text(f"{exit_code}\n")
        self.answers[str(job.job_id)] = state
        self.changed.add(str(job.job_id))

    def states(self, jobs: list[Job]) -> dict[Job, JobState]:
        self.queries += 1
        changed, self.changed = self.changed, set()
        found = {}
        for job in jobs:
            if job.job_id in changed:
                self.judged += 1
                found[job] = self.answers[job.job_id]
        return found

    def cancel(self, jobs: list[Job]) -> None:
        self.cancelled += [str(job.job_id) for job in jobs]


class SimulatedHere(Simulated):
    """The in-memory batch system, its jobs on this host (as the local system's): pilots may start ahead."""

    on_this_host = True

    def capacity(self) -> int:
        return 4


def make_job(folder: Path, key: str, system: str = "simulated", **settings: object) -> Job:
    defaults = {"max_resubmissions": 2, "resubmit_failed_tasks": False, **settings}
    return Job(key=key, name=f"Work({key})", family="Work", system=system,
               files=JobFiles.at(folder / "task_files", "Work", key, folder / "logs" / key),
               config=NO_SETTINGS.replace(**defaults), params={"key": key})
