"""Every change of a job's state that a run's record told, kept for the timeline and the report.

A run of 100,000 jobs sees some 300,000 changes while its jobs are still held in memory, so they are kept in
flat columns (a time, the job's key, its new state and its batch job id; no object per change) and grouped by
job only when the run is over and its timeline and report are written.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Mapping
from typing import Any

from b2batch.engine.record import RECORD_FIELDS

#: One change as the timeline and the report read it: when, the new state, the batch job id (or None).
Change = tuple[float, str, "str | None"]

#: The keys of a job in the report, besides its history: the record's fields.
_FIELDS = RECORD_FIELDS


class StateChanges:
    """The changes of state of a run's jobs, in the order they were seen."""

    def __init__(self) -> None:
        self._at = array("d")
        self._keys: list[str] = []  # the record's own strings: no copy per change
        self._states: list[str] = []
        self._job_ids: list[str | None] = []

    def add(self, key: str, at: float, state: str, job_id: str | None) -> None:
        self._at.append(at)
        self._keys.append(key)
        self._states.append(state)
        self._job_ids.append(job_id)

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[tuple[str, Change]]:
        for i, key in enumerate(self._keys):
            yield key, (self._at[i], self._states[i], self._job_ids[i])

    def by_job(self) -> dict[str, list[Change]]:
        """The changes of each job (by its key), in order: made when asked, for writing the run's files."""
        grouped: dict[str, list[Change]] = {}
        for key, change in self:
            grouped.setdefault(key, []).append(change)
        return grouped


class JobView(Mapping[str, Any]):
    """One job of the report as the HTML page reads it (``job["family"]``, ``job.get("history")``), from the
    run's record itself: no copy of its values per job. Its ``history`` holds (at, state, job_id) tuples where
    the report's file has objects."""

    __slots__ = ("_record", "_history")

    def __init__(self, record: Any, history: list[Change]) -> None:
        self._record = record
        self._history = history

    def __getitem__(self, name: str) -> Any:
        if name == "history":
            return self._history
        if name not in _FIELDS:
            raise KeyError(name)
        return getattr(self._record, name)

    def __iter__(self) -> Iterator[str]:
        return iter((*_FIELDS, "history"))

    def __len__(self) -> int:
        return len(_FIELDS) + 1
