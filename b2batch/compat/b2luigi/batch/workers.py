"""``b2luigi.batch.workers``: ``BatchSystems``, the names the ``batch_system`` setting takes in b2luigi.

b2luigi's ``SendJobWorker`` and ``SendJobWorkerSchedulerFactory`` are not offered: b2batch does not run
tasks through a luigi worker of its own (its graph runner submits jobs; see docs/architecture.md).
"""

from __future__ import annotations

import enum

__all__ = ["BatchSystems"]


class BatchSystems(enum.Enum):
    """b2luigi's batch system names (``gbasf2`` is refused by b2batch with an explanation)."""

    auto = "auto"
    lsf = "lsf"
    htcondor = "htcondor"
    slurm = "slurm"
    gbasf2 = "gbasf2"
    local = "local"
    test = "test"
    custom = "custom"
