"""``b2luigi.batch.cache``: ``BatchJobStatusCache``, the job-status cache b2luigi's batch processes share.

A subclass implements ``_ask_for_job_status(job_id=None)``, which stores states with ``self[job_id] =
state`` (all jobs' when ``job_id`` is None). Looking up an unknown or expired job asks for all jobs once,
then for that job alone; a job still unknown raises ``KeyError``. Entries live ``ttl`` seconds (20).
"""

from __future__ import annotations

import abc
import time
from typing import Any

__all__ = ["BatchJobStatusCache"]


class BatchJobStatusCache(abc.ABC, dict):
    """A dict of job id to status whose entries expire after ``ttl`` seconds."""

    def __init__(self, ttl: float = 20.0) -> None:
        super().__init__()
        self.ttl = ttl
        self._stored_at: dict[Any, float] = {}

    @abc.abstractmethod
    def _ask_for_job_status(self, job_id: Any = None) -> None:
        """Ask the batch system for the status of ``job_id`` (of all jobs when None) and store it."""

    def __setitem__(self, job_id: Any, status: Any) -> None:
        super().__setitem__(job_id, status)
        self._stored_at[job_id] = time.monotonic()

    def __contains__(self, job_id: object) -> bool:
        stored = self._stored_at.get(job_id)
        return stored is not None and time.monotonic() - stored < self.ttl and dict.__contains__(self, job_id)

    def __getitem__(self, job_id: Any) -> Any:
        for ask in (None, job_id):
            if job_id in self:
                return dict.__getitem__(self, job_id)
            self._ask_for_job_status(job_id=ask)
        if job_id in self:
            return dict.__getitem__(self, job_id)
        raise KeyError(job_id)
