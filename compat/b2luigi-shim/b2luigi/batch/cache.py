"""``b2luigi.batch.cache``: ``BatchJobStatusCache``, the job-status cache b2luigi's batch processes share.

A subclass implements ``_ask_for_job_status(job_id=None)``, which stores states with ``self[job_id] =
state`` (all jobs' when ``job_id`` is None). Looking up an unknown or expired job asks for all jobs once,
then for that job alone; a job still unknown raises ``KeyError``. Entries live for the setting
``batch_status_cache_ttl`` (seconds, default :data:`DEFAULT_BATCH_STATUS_CACHE_TTL`), read when the first
status is stored; ``seed_submitted`` stores a status for jobs just submitted, so that their first look-up
asks the batch system nothing.
"""

from __future__ import annotations

import abc
import functools
import time
from collections.abc import Iterable
from typing import Any

__all__ = ["DEFAULT_BATCH_STATUS_CACHE_TTL", "BatchJobStatusCache"]

#: How long a job's status is kept (seconds) unless the setting ``batch_status_cache_ttl`` says otherwise.
DEFAULT_BATCH_STATUS_CACHE_TTL = 120

_MAX_ENTRIES = 100_000


class BatchJobStatusCache(abc.ABC, dict):
    """A dict of job id to status whose entries expire; missing ones are asked of the batch system."""

    def __init__(self, ttl: float | None = None) -> None:
        super().__init__()
        if ttl is not None:
            self.__dict__["_ttl"] = ttl
        self._stored_at: dict[Any, float] = {}
        #: The job ids of the running tasks, one list per task (HTCondor asks condor_history for them at once).
        self._job_ids: list[Any] = []

    @functools.cached_property
    def _ttl(self) -> float:
        from b2luigi.core.settings import get_setting

        ttl = get_setting("batch_status_cache_ttl", default=DEFAULT_BATCH_STATUS_CACHE_TTL)
        if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or ttl <= 0:
            raise ValueError(f"The setting batch_status_cache_ttl must be a positive number of seconds, got {ttl!r}")
        return ttl

    @property
    def ttl(self) -> float:
        """Seconds a status is kept; setting it applies to the statuses stored already too."""
        return self._ttl

    @ttl.setter
    def ttl(self, seconds: float) -> None:
        self.__dict__["_ttl"] = seconds

    def _expiry_time(self, job_id: Any, status: Any, now: float) -> float:
        """When the status ``status`` of ``job_id``, stored at ``now``, expires."""
        return now + self._ttl

    @abc.abstractmethod
    def _ask_for_job_status(self, job_id: Any = None) -> None:
        """Ask the batch system for the status of ``job_id`` (of all jobs when None) and store it."""

    def seed_submitted(self, job_ids: Iterable[Any], status: Any) -> None:
        """Store ``status`` (one that counts as running) for jobs just submitted."""
        for job_id in job_ids:
            self[job_id] = status

    def add_job_ids(self, job_ids: Any) -> None:
        self._job_ids.append(job_ids)

    def remove_job_ids(self, job_ids: Any) -> None:
        self._job_ids.remove(job_ids)

    def __setitem__(self, job_id: Any, status: Any) -> None:
        self._ttl  # noqa: B018  (read, and checked, when the first status is stored)
        if job_id not in self._stored_at and len(self._stored_at) >= _MAX_ENTRIES:
            self._drop(min(self._stored_at, key=self._stored_at.__getitem__))
        super().__setitem__(job_id, status)
        self._stored_at[job_id] = time.monotonic()

    def _drop(self, job_id: Any) -> None:
        self._stored_at.pop(job_id, None)
        dict.pop(self, job_id, None)

    def _fresh(self, job_id: Any) -> bool:
        stored_at = self._stored_at.get(job_id)
        if stored_at is None:
            return False
        if time.monotonic() >= self._expiry_time(job_id, dict.get(self, job_id), stored_at):
            self._drop(job_id)
            return False
        return True

    def __contains__(self, job_id: object) -> bool:
        return self._fresh(job_id)

    def get(self, job_id: Any, default: Any = None) -> Any:
        """The stored status of ``job_id``, or ``default``; asks the batch system nothing."""
        return dict.__getitem__(self, job_id) if self._fresh(job_id) else default

    def __getitem__(self, job_id: Any) -> Any:
        for ask in (None, job_id):
            if self._fresh(job_id):
                return dict.__getitem__(self, job_id)
            self._ask_for_job_status(job_id=ask)
        if self._fresh(job_id):
            return dict.__getitem__(self, job_id)
        raise KeyError(job_id)

    def clear(self) -> None:
        super().clear()
        self._stored_at.clear()
