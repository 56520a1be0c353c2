""":class:`RunConfig`: what one run needs at run level, resolved once by its front-end and then fixed.

The engine and the batch systems read run-level values (throttle, arrays, polling, timeouts, scheduler-call
limits, the run's batch system and base folder, global per-system options) only from ``run.config``, never
from the settings store: two runs in one process each keep their own. A front-end builds it with
:func:`b2batch.settings.runconfig.run_config`, which reads the settings chain; values that belong to one job (a
task's ``slurm_settings``, its ``poll_interval``, ...) travel with the job (``job.config[name]``).

The defaults here are those of b2batch's settings (``tests/engine/test_runconfig.py`` checks that they agree), for
a run made without a front-end (``Run()`` in tests and tools).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from b2batch.engine.escalation import megabytes, seconds

#: The settings a RunConfig holds, by field name (all fields but ``base_dir`` and ``job_wrapper``, which the
#: front-end gives).
SETTING_FIELDS = ("batch_system", "job_shape", "poll_interval", "max_poll_interval", "max_jobs_in_flight",
                  "max_scheduler_calls_per_second", "max_array_size", "submission_window",
                  "scheduler_unreachable_timeout", "scheduler_call_timeout", "local_slots", "htcondor_settings",
                  "retry_memory_factor", "retry_time_factor", "max_retry_memory", "max_retry_time",
                  "max_node_failures", "unit_logs", "local_start")


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """The run-level configuration of one run (immutable: make another with :meth:`replace`)."""

    #: The run's batch system (a name, ``auto`` or a class): the setting, or the workflow's --batch-system.
    batch_system: Any = "auto"
    #: How units become batch jobs: ``auto`` (the run decides per kind, :mod:`b2batch.engine.pilots.shape_rule`),
    #: ``job_per_task``, ``bundles`` or ``pilots`` (explicit ``pilot_jobs`` or ``tasks_per_job`` of a unit win).
    job_shape: str = "auto"
    #: Seconds between status queries at first, and the longest wait while nothing changes.
    poll_interval: float = 1.0
    max_poll_interval: float = 30.0
    #: Most jobs of one batch system in flight at once (None: no limit).
    max_jobs_in_flight: int | None = None
    #: Scheduler commands per second, for each batch system of the run (0 or None: no cap).
    max_scheduler_calls_per_second: float | None = 5.0
    #: Most jobs in one job array.
    max_array_size: int = 1000
    #: Seconds a ready job waits for more to join its array (doubling while the start goes on).
    submission_window: float = 2.0
    #: Seconds a batch system may keep failing before its jobs fail with its last error.
    scheduler_unreachable_timeout: float = 600.0
    #: Seconds one scheduler command may take.
    scheduler_call_timeout: float = 60.0
    #: Jobs the local batch system runs at once (0 or None: the number of CPUs).
    local_slots: int | None = None
    #: How the local batch system starts a job whose wrapper only sets the environment and runs this interpreter
    #: on the entry point: ``fork`` it from a copy of the steering process made when the run starts, ``wrapper``
    #: (its wrapper, a fresh interpreter, as on a cluster), ``auto`` (fork while the steering process has one
    #: thread when the run starts). :mod:`b2batch.systems.local_forks`.
    local_start: str = "auto"
    #: The global htcondor_settings (a job's own overlay them).
    htcondor_settings: Mapping[str, Any] = dataclasses.field(default_factory=lambda: MappingProxyType({}))
    #: Escalation (docs/policies.md): a job killed for memory (time) goes again asking for this factor times
    #: its request (None: off), at most max_retry_memory (a size, e.g. "64G"; None: no bound) and max_retry_time
    #: (seconds or e.g. "2d", "48:00:00").
    retry_memory_factor: float | None = None
    retry_time_factor: float | None = None
    max_retry_memory: Any = None
    max_retry_time: Any = None
    #: Node failures after which a node is excluded from the run's later submissions (0: never).
    max_node_failures: int = 3
    #: Where a unit in a pilot or bundle writes its stdout and stderr: ``own`` log files, or ``pilot``: its part
    #: of its worker's logs (no files per unit; the worker's log line says which bytes). ``auto`` is ``own``
    #: unless the front-end decides (a run without --batch takes ``pilot``).
    unit_logs: str = "auto"
    #: The settings the run's command-line flags set (``--batch-system``, ``--workers``): a layer above
    #: ``set_setting`` in the front-end's resolver, and what the node side of the run's jobs sees too.
    flags: Mapping[str, Any] = dataclasses.field(default_factory=lambda: MappingProxyType({}))
    #: The folder relative paths of the run are relative to (None: the front-end's default, e.g. the script's).
    base_dir: Path | None = None
    #: The front-end's job-script maker, for the worker jobs the engine makes itself (pilots, bundles):
    #: ``job_wrapper(owner, label, config, job_files, arguments)`` is the text of an executable wrapper that
    #: runs the node-side entry point with ``arguments`` under the settings ``config`` (a JobConfig) of
    #: ``owner`` (:func:`b2batch.jobscript.wrapper.job_wrapper`). None: the run makes no worker jobs.
    job_wrapper: Callable[[Any, str, Any, Any, list[str]], str] | None = None
    #: Whether the run's worker jobs (pilots, bundles) end with its steering process, killing the unit they run:
    #: a run without --batch, whose local jobs stand for luigi's worker processes (a killed run leaves none
    #: running). False: they outlive it, for a restarted run to follow.
    workers_end_with_steering: bool = False

    def __post_init__(self) -> None:
        # Frozen all the way down: a dict given here is copied into a read-only view.
        object.__setattr__(self, "htcondor_settings", MappingProxyType(dict(self.htcondor_settings or {})))
        object.__setattr__(self, "flags", MappingProxyType(dict(self.flags or {})))

    @property
    def max_retry_memory_mb(self) -> float | None:
        return None if self.max_retry_memory in (None, "") else megabytes(self.max_retry_memory)

    @property
    def max_retry_time_s(self) -> float | None:
        return None if self.max_retry_time in (None, "") else seconds(self.max_retry_time)

    def replace(self, **changes: Any) -> RunConfig:
        """A copy with ``changes``."""
        return dataclasses.replace(self, **changes)

    def local_slot_count(self) -> int:
        """Jobs the local batch system runs at once (0 or None: the number of CPUs)."""
        return self.local_slots or os.cpu_count() or 1

    def resolve(self, path: str | os.PathLike[str]) -> Path:
        """``path`` made absolute against the run's base folder (``~`` expanded); without a base folder, against
        the current directory."""
        p = Path(os.path.expanduser(os.fspath(path)))
        if p.is_absolute():
            return p
        return (self.base_dir or Path.cwd()) / p
