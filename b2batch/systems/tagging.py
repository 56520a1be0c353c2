"""Submissions a steering process began but did not see end: tagged batch jobs, and finding them again.

Before a command-line batch system is asked to take jobs, each job's folder gets an intent record
(``submitting.json``, :meth:`~b2batch.engine.files.JobFiles.record_intent`) naming the submission's tag and the
job's index in it; the batch job carries the tag (its name, for HTCondor an attribute of its ad). A steering
process SIGKILLed while the scheduler took the jobs (or before it wrote their journals) leaves the intents
behind; the next one asks the scheduler once per batch system which jobs carry which tags
(:meth:`TaggedSubmissions.find_submitted`) and follows those it finds (:meth:`TaggedSubmissions.adopt`) instead
of submitting their work again.

A tag is ``<job name>.b2b<run tag>-<n>`` (``n`` counts the run's submissions; a job of its own adds a hash of its
key): made only of letters, digits, ``_``, ``.`` and ``-`` (:func:`safe_name`), which every scheduler takes as a
job name and no submit file or shell reads as anything else.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any, ClassVar

from b2batch.engine import Job, JobStatus, NativeState
from b2batch.engine.digests import sha1_hex
from b2batch.engine.outcome import written_exit_code
from b2batch.errors import B2BatchError
from b2batch.systems import command_runner

logger = logging.getLogger(__name__)

_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-]+")
#: Longest part of a job name taken from the job_name setting or the family (the tag adds about 30 characters).
NAME_LIMIT = 64


def safe_name(text: str, limit: int = NAME_LIMIT) -> str:
    """``text`` as a job name any scheduler takes and nothing parses further: runs of other characters than
    letters, digits, ``_``, ``.`` and ``-`` become one ``_``, at most ``limit`` characters, never empty and
    never starting with ``-`` (an option) or ``.``."""
    name = _UNSAFE.sub("_", str(text))[:limit].lstrip("-.")
    return name or "job"


def submission_tag(base: str, number: int, key: str | None) -> str:
    """The tag of the ``number``-th submission of a run whose jobs are named ``base``; ``key``: the job's key for a
    job of its own (None: an array, whose elements are told apart by their index)."""
    tag = f"{base}-{number}"
    return tag if key is None else f"{tag}-{sha1_hex(key.encode())[:8]}"


class TaggedSubmissions:
    """The tagging part of a command-line batch system (mixed into
    :class:`~b2batch.systems.scheduler.SchedulerSystem`, whose attributes it uses: ``run``, ``name``,
    ``state_map``, ``job_name``, ``_track``)."""

    run: Any
    name: ClassVar[str]
    state_map: ClassVar[dict[str, JobStatus]]
    calls: command_runner.SchedulerCalls
    call_timeout: float
    #: What the scheduler listed under tags, per place (set up by the system's ``__init__``).
    _tagged: dict[tuple[str, ...], dict[str, dict[str, NativeState]]]
    #: When each place's listing was made (None: made again after :attr:`record_lag`); set up with ``_tagged``.
    _tagged_at: dict[tuple[str, ...], float | None]
    #: Seconds after a job ends within which the scheduler may list it nowhere (Grid Engine writes its
    #: accounting on a flush, 15 s by default): an intent's job that wrote exit code 0 but is not listed is
    #: looked for once more, that long after the first listing, before its work is submitted again.
    record_lag: ClassVar[float] = 0.0

    def job_name(self, job: Job) -> str:
        raise NotImplementedError

    def _track(self, job: Job, job_id: str) -> None:
        raise NotImplementedError

    # --- what a batch system implements ---------------------------------------------------------------

    def tagged_command(self, scope: tuple[str, ...]) -> list[str]:
        """One command that lists the user's jobs with their tags (at the place ``scope`` where a system has
        several, e.g. HTCondor's pool and schedd)."""
        raise NotImplementedError

    def parse_tagged(self, stdout: str) -> dict[str, dict[str, NativeState]]:
        """The jobs in the output of :meth:`tagged_command`: by tag, their states by job id."""
        raise NotImplementedError

    def tagged_commands(self, scope: tuple[str, ...]) -> list[list[str]]:
        """The commands whose outputs (:meth:`parse_tagged`) together list every job of the user with its tag,
        those that ended since the intents were written too: a job that ended well after the front-end's check
        is followed, not submitted again. Default: :meth:`tagged_command` alone (its listing keeps ended jobs a
        while); HTCondor adds its history, where ended jobs go at once."""
        return [self.tagged_command(scope)]

    def tagged_listing(self, command: list[str]) -> str:
        """The output of one of :meth:`tagged_commands` (a failure raises: nothing is known then)."""
        return command_runner.run(command, timeout=self.call_timeout, calls=self.calls).stdout

    def element_index(self, job_id: str) -> int | None:
        """The 1-based index of the array element ``job_id`` (None: a job of its own)."""
        raise NotImplementedError

    def tag_scope(self, intent: dict[str, Any], job: Job | None) -> tuple[str, ...]:
        """Where to look for the submission of ``intent`` (default: the one place the commands reach)."""
        return ()

    def intent_extra(self, job: Job) -> dict[str, Any]:
        """What a later steering process needs beyond the tag to find the job (e.g. HTCondor's schedd)."""
        return {}

    # --- submitting -----------------------------------------------------------------------------------

    def submitted_name(self, job: Job) -> str:
        """The tag of the submission ``job`` goes out with now (its job name on the command line)."""
        return str(job.placement.get("submission") or self.job_name(job))

    def intend(self, group: list[Job]) -> None:
        """Before the scheduler is asked: tag this submission of ``group`` and record the intent in each job's
        folder (an array's elements by their 1-based index)."""
        first = group[0]
        tag = submission_tag(self.job_name(first), self.run.next_number(), first.key if len(group) == 1 else None)
        for index, job in enumerate(group, start=1):
            job.placement["submission"] = tag
            job.files.record_intent(self.name, tag, index if len(group) > 1 else None, self.intent_extra(job))

    # --- finding submissions again --------------------------------------------------------------------

    def find_submitted(self, intent: dict[str, Any], job: Job | None = None) -> tuple[str, NativeState] | None:
        """The job id and state of the batch job ``intent`` began to submit, if the scheduler lists it. The
        scheduler is asked once per place for all of them (answers are kept for the run: a killed steering
        process submits nothing more)."""
        scope = self.tag_scope(intent, job)
        known = self._tagged
        if scope not in known:
            try:
                listed: dict[str, dict[str, NativeState]] = {}
                for command in self.tagged_commands(scope):  # in order: a later listing is the newer word
                    for tag, jobs in self.parse_tagged(self.tagged_listing(command)).items():
                        listed.setdefault(tag, {}).update(jobs)
                known[scope] = listed
                self._tagged_at.setdefault(scope, time.monotonic())
            except (B2BatchError, ValueError) as e:  # ValueError: unreadable output
                logger.warning("Could not ask %s for the jobs of an earlier steering process by their tags: %s",
                               self.name, e)
                return None
        found = known[scope].get(str(intent.get("submission")), {})
        index = intent.get("index")
        chosen = [(job_id, native) for job_id, native in found.items() if self.matches(job_id, index)]
        if not chosen:
            return None
        # Two jobs with one tag (a submission the scheduler took twice): the one still queued or running.
        chosen.sort(key=lambda item: not (self.state_map.get(item[1].state) or JobStatus.running).final)
        return chosen[-1]

    def matches(self, job_id: str, index: int | None) -> bool:
        """Whether ``job_id`` is the element ``index`` of its submission (None: a job of its own)."""
        return self.element_index(job_id) == index

    def adopt(self, job: Job, intent: dict[str, Any]) -> bool:
        found = self.find_submitted(intent, job)
        if found is None and self.record_lag and written_exit_code(job.files) == 0:
            found = self._find_after_lag(intent, job)
        if found is None:
            return False
        job_id, native = found
        status = self.state_map.get(native.state, JobStatus.running)  # an unknown state: it is there
        # As for a journal: a job that ended successfully is followed (the next poll reports its end), others
        # that ended are submitted again.
        if status.final and written_exit_code(job.files) != 0:
            return False
        job.placement["submission"] = str(intent.get("submission"))
        self._track(job, job_id)
        logger.info("Job %s: found by its tag %s, submitted by a steering process that was stopped before it "
                    "recorded it", job_id, intent.get("submission"))
        return True

    def _find_after_lag(self, intent: dict[str, Any], job: Job) -> tuple[str, NativeState] | None:
        """The job of ``intent`` ran and ended well (its exit code 0 is there), yet the listing does not have it:
        made before the scheduler recorded the end. The place is listed once more, :attr:`record_lag` after its
        first listing (a job not listed then is no job of this scheduler's: its work goes again)."""
        scope = self.tag_scope(intent, job)
        first = self._tagged_at.get(scope)
        if first is None or scope not in self._tagged:  # listed again already, or the scheduler could not be asked
            return None
        wait = first + self.record_lag - time.monotonic()
        if wait > 0:
            logger.info("%s lists no job tagged %s, though its exit code 0 is there; asking again in %.0f s (an "
                        "ended job's record may lag)", self.name, intent.get("submission"), wait)
            time.sleep(wait)
        self._tagged_at[scope] = None
        del self._tagged[scope]
        return self.find_submitted(intent, job)
