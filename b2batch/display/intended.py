"""Jobs whose submission began but whose steering process was stopped before it recorded the answer, as
``b2batch status`` and ``cancel`` see them: the job folder holds an intent (``submitting.json``) newer than its
journal, and the batch system is asked once for the jobs that carry the intents' tags
(:mod:`b2batch.systems.tagging`). Found, such a job is followed by its id as any other; not found, it was not
submitted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from b2batch.engine.files import JobFiles


class Recorded(Protocol):
    """What is needed of a recorded job (display.jobstates.RecordedJob)."""

    system: str
    job_id: str
    state: str
    detail: str
    journal: dict[str, Any]


def take_intent(job: Recorded, files: JobFiles) -> bool:
    """Whether the job in ``files`` has an intent newer than its journal; if so ``job`` names its batch system and
    keeps the intent as its journal, its state still to be asked (:func:`find_intended`)."""
    intent = files.read_intent()
    if intent is None:
        return False
    job.system, job.journal = str(intent.get("system", "")), {**intent, "intent": True}
    return True


def find_intended(system: str, group: list[Any], scheduler_of: Callable[[str, list[Any], str], Any]) -> list[Any]:
    """Give each job of ``group`` (of batch system ``system``) that :func:`take_intent` took its job id, as the
    batch system lists the intent's tag (one query for all of them); those it does not list are "not submitted".
    The jobs whose state is still to be asked."""
    intended = [job for job in group if job.journal.get("intent")]
    if not intended:
        return group
    try:
        scheduler = scheduler_of(system, [], "ask")
        found = {id(job): scheduler.find_submitted(job.journal) for job in intended}
    except (NotImplementedError, AttributeError):  # a plugin: it has no tags to look for
        found = {}
    for job in intended:
        if found.get(id(job)) is None:
            job.state, job.detail = "not submitted", "its submission began, but the batch system has no such job"
        else:
            job.job_id = found[id(job)][0]
    return [job for job in group if job.state == "unknown"]
