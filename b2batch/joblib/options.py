"""The parameters of the joblib backend: joblib-htcondor's names and meanings, turned into b2batch settings
for the batch system the calls go to.

joblib-htcondor describes a job in HTCondor's terms (``request_cpus``, ``request_memory``, ``request_disk``,
``universe``, ``initial_dir``, ``extra_directives``, ``python_path``). :func:`job_settings` says the same to
each batch system b2batch knows:

=================  ======================  ====================  ======================  ======================
parameter          htcondor                slurm                 sge                     lsf
=================  ======================  ====================  ======================  ======================
request_cpus       ``request_cpus``        ``cpus-per-task``     ``pe "smp N"``          ``job_slots`` (-n)
request_memory     ``request_memory``      ``mem`` (MB)          ``h_vmem`` per slot     ``rusage[mem=MB]``
request_disk       ``request_disk``        ``tmp`` (MB)          (none: a warning)       ``rusage[tmp=MB]``
universe           ``universe``            (none: a warning)     (none: a warning)       (none: a warning)
extra_directives   ``htcondor_settings``   ``slurm_settings``    ``sge_settings``        ``lsf_settings``
=================  ======================  ====================  ======================  ======================

``initial_dir`` is the setting ``working_dir`` and ``python_path`` the setting ``executable`` everywhere; on
``local`` the resources mean nothing. Every other b2batch setting (``slurm_settings``, ``pilot_jobs``,
``max_resubmissions`` ...) may be given by name too; it wins over what the parameters above make of it.
"""

from __future__ import annotations

import difflib
import logging
import math
import os
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable

from b2batch.errors import SettingError
from b2batch.settings import SETTINGS, get_setting

logger = logging.getLogger(__name__)

#: The most units of a call with a negative ``n_jobs`` (or None: "everything") out at once, within the throttle:
#: the window of the shaping rule (how many pilots). joblib-htcondor's ``sys.maxsize // 2`` reads the whole input
#: at once (a Python object per call held until its end: 3 GB for a million calls); here the input is read as
#: the calls go out, so the steering process's memory does not grow with the number of calls.
DISPATCH_ALL = 1_000
#: What joblib is told for "everything": it cuts its batches for this many workers (the end of the input into
#: 10 x this many) and keeps twice as many batches out before the calls were timed; after that the call asks
#: joblib for more batches itself (:meth:`~b2batch.joblib.backend.B2BatchBackend.one_more_batch`) until about a
#: second of calls waits, instead of one batch each time a batch ends. 1,000 here cut 10,000 calls into 10,000
#: batches of one call each, and kept only 2,000 one-call batches out.
JOBLIB_N_JOBS = 100

#: Default throttle when ``n_jobs`` is negative ("dispatch everything"), as in joblib-htcondor.
DEFAULT_THROTTLE = 1000

_MEMORY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(?:i?b)?\s*$", re.IGNORECASE)
_FACTOR_TO_MB = {"": 1.0, "k": 1 / 1024, "m": 1.0, "g": 1024.0, "t": 1024.0 ** 2, "p": 1024.0 ** 3}


def megabytes(value: Any, name: str) -> int:
    """A size as HTCondor reads it (a number is MB; units K, M, G, T with an optional B, any case) in MB,
    rounded up: ``megabytes("1Gb", ...) == 1024``."""
    if isinstance(value, bool):
        raise SettingError(f"{name} must be a size such as 2048 (MB) or \"2GB\", not {value!r}")
    if isinstance(value, (int, float)):
        return max(1, math.ceil(value))
    found = _MEMORY.match(str(value))
    if not found:
        raise SettingError(f"{name} must be a size such as 2048 (MB) or \"2GB\", not {value!r}")
    return max(1, math.ceil(float(found.group(1)) * _FACTOR_TO_MB[found.group(2).lower()]))


@dataclass
class Options:
    """What the caller asked of the backend (every parameter of :class:`~b2batch.joblib.B2BatchBackend`)."""

    batch_system: str | None = None
    request_cpus: int | None = None
    request_memory: str | int | None = None
    request_disk: str | int | None = None
    universe: str | None = None
    pool: str | list[str] | None = None
    schedd: Any = None
    python_path: str | None = None
    initial_dir: str | os.PathLike[str] | None = None
    extra_directives: dict[str, Any] | None = None
    log_dir_prefix: str | os.PathLike[str] | None = None
    poll_interval: float | None = None
    shared_data_dir: str | os.PathLike[str] | None = None
    delete_task_file_on_load: bool = False
    worker_log_level: int | str = logging.INFO
    throttle: int | list[int] | None = None
    batch_size: int | str = "auto"
    max_recursion_level: int = 0
    export_metadata: bool = False
    context_func: Callable[[], Any] | None = None
    progress: bool | None = None
    #: Other b2batch settings by name (``slurm_settings``, ``pilot_jobs``, ``max_resubmissions`` ...).
    settings: dict[str, Any] = field(default_factory=dict)

    def check(self) -> None:
        """Refuse values that cannot work, naming the parameter."""
        for key in self.settings:
            if key not in SETTINGS:
                raise SettingError(unknown_option_message(key))
        if isinstance(self.throttle, list):
            if not self.throttle:
                raise ValueError("throttle must be a whole number, or a list of them with one per nesting level; "
                                 "it is an empty list")
            if not all(isinstance(t, int) and t > 0 for t in self.throttle):
                raise ValueError(f"throttle must list positive whole numbers, not {self.throttle!r}")
        elif self.throttle is not None and (not isinstance(self.throttle, int) or self.throttle < 1):
            raise ValueError(f"throttle must be a positive whole number or a list of them, not {self.throttle!r}")
        if self.batch_size != "auto" and (not isinstance(self.batch_size, int) or self.batch_size < 1):
            raise ValueError(f"batch_size must be 'auto' or a positive whole number, not {self.batch_size!r}")
        if not isinstance(self.max_recursion_level, int) or self.max_recursion_level < -1:
            raise ValueError(f"max_recursion_level must be -1 (no limit) or a level of 0 or more, not "
                             f"{self.max_recursion_level!r}")
        if self.context_func is not None and not callable(self.context_func):
            raise ValueError(f"context_func must be a function without arguments, not {self.context_func!r}")
        if self.schedd is not None and not isinstance(self.schedd, str):
            raise ValueError("schedd must be the schedd's name (b2batch talks to HTCondor through its commands, "
                             f"not through an htcondor2.Schedd object); got {self.schedd!r}")
        for name in ("request_memory", "request_disk"):
            if getattr(self, name) is not None:
                megabytes(getattr(self, name), name)
        self.log_level()

    def log_level(self) -> int:
        level = self.worker_log_level
        if isinstance(level, str):
            number = logging.getLevelName(level.upper())
            if not isinstance(number, int):
                raise ValueError(f"worker_log_level must be a logging level such as 'INFO' or 20, not {level!r}")
            return number
        return int(level)

    def throttle_at(self, level: int, n_jobs: int) -> int | None:
        """The throttle of a call at nesting ``level``: the list's entry for it (its last for deeper levels),
        the number, or with neither the default of joblib-htcondor: 1000 when ``n_jobs`` is negative, else none."""
        if isinstance(self.throttle, list):
            return self.throttle[min(level, len(self.throttle) - 1)]
        if self.throttle is not None:
            return self.throttle
        return DEFAULT_THROTTLE if n_jobs < 0 else None

    def system(self) -> str:
        return str(self.batch_system or self.settings.get("batch_system") or get_setting("batch_system"))

    def shared_data_folder(self, default: str | None) -> Path:
        """Where task files go: ``shared_data_dir``; else ``default`` (a backend's own, relative to the working
        directory); else ``joblib`` in the setting ``task_file_dir``."""
        if self.shared_data_dir is None and default is not None:
            return (Path.cwd() / default).resolve()
        if self.shared_data_dir is None:
            from b2batch.jobscript import base_folder

            return base_folder.resolve(get_setting("task_file_dir")).resolve() / "joblib"
        return Path(os.path.expanduser(os.fspath(self.shared_data_dir))).resolve()


#: joblib's own parameters of ``parallel_config`` and ``Parallel`` (a misspelt one arrives at the backend).
JOBLIB_PARAMETERS = ("backend", "n_jobs", "verbose", "temp_folder", "max_nbytes", "mmap_mode", "prefer", "require",
                     "inner_max_num_threads", "backend_params", "return_as", "timeout", "pre_dispatch", "batch_size",
                     "backend_kwargs")


def unknown_option_message(name: str) -> str:
    """One line for an option the backend does not know: "did you mean" among joblib's parameters, the
    backend's and b2batch's settings, and the names it knows."""
    own = [f.name for f in fields(Options) if f.name != "settings"]
    close = difflib.get_close_matches(name, [*own, *JOBLIB_PARAMETERS, *SETTINGS], n=3, cutoff=0.75)
    hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    return (f"Unknown option {name!r} given to the joblib backend (parallel_config(backend=..., {name}=...)).{hint} "
            f"Fix the name; the backend's options: {', '.join(own)}; joblib's own: {', '.join(JOBLIB_PARAMETERS)}; "
            f"and any b2batch setting by name: {', '.join(SETTINGS)}.")


def job_settings(options: Options, system: str) -> dict[str, Any]:
    """The b2batch settings for the calls' jobs on ``system`` (a name such as ``slurm``, ``auto`` resolved)."""
    values: dict[str, Any] = {}
    if options.python_path:
        values["executable"] = [str(options.python_path)]
    values["working_dir"] = str(Path(options.initial_dir or os.getcwd()).resolve())
    if options.poll_interval is not None:
        values["poll_interval"] = options.poll_interval
        values["max_poll_interval"] = options.poll_interval  # joblib-htcondor's: a fixed interval
    key = {"htcondor": "htcondor_settings", "slurm": "slurm_settings", "sge": "sge_settings",
           "lsf": "lsf_settings"}.get(system)
    resources = _resources(options, system, values)
    if key is not None:
        merged = dict(get_setting(key) or {}) if key != "htcondor_settings" else {}  # HTCondor merges it itself
        merged.update(resources)
        merged.update(options.extra_directives or {})
        merged.update(options.settings.get(key) or {})
        values[key] = merged
    elif options.extra_directives:
        raise SettingError(f"extra_directives are submit options of a batch system; the calls go to {system!r}, "
                           f"which takes none")
    if (options.pool or options.schedd) and system != "htcondor":
        raise SettingError(f"pool and schedd name an HTCondor pool and schedd; the calls go to {system!r}")
    if options.pool:  # the condor_* commands of the call's jobs get -pool and -name
        values["htcondor_pool"] = options.pool if isinstance(options.pool, str) else ",".join(map(str, options.pool))
    if options.schedd:
        values["htcondor_schedd"] = str(options.schedd)
    for name, value in options.settings.items():
        if name != key:
            values[name] = value
    return values


def _resources(options: Options, system: str, values: dict[str, Any]) -> dict[str, Any]:
    """request_cpus, request_memory, request_disk and universe in the terms of ``system``."""
    cpus, memory, disk = options.request_cpus, options.request_memory, options.request_disk
    mb = megabytes(memory, "request_memory") if memory is not None else None
    disk_mb = megabytes(disk, "request_disk") if disk is not None else None
    out: dict[str, Any] = {}
    if system == "htcondor":
        for name, value in (("request_cpus", cpus), ("request_memory", memory), ("request_disk", disk),
                            ("universe", options.universe)):
            if value is not None:
                out[name] = value
        return out
    if options.universe not in (None, "vanilla"):
        logger.warning("universe=%r is an HTCondor notion; the calls go to %s, which ignores it", options.universe,
                       system)
    if system == "slurm":
        if cpus:
            out["cpus-per-task"] = int(cpus)
        if mb:
            out["mem"] = f"{mb}M"
        if disk_mb:
            out["tmp"] = f"{disk_mb}M"
    elif system == "sge":
        if cpus and int(cpus) > 1:
            out["pe"] = f"smp {int(cpus)}"
        if mb:
            out["resources"] = {"h_vmem": f"{math.ceil(mb / max(1, int(cpus or 1)))}M"}  # per slot
        if disk_mb:
            logger.warning("request_disk has no standard Grid Engine resource; set sge_settings['resources'] "
                           "to your site's (e.g. {'tmpfree': '%dM'})", disk_mb)
    elif system == "lsf":
        if cpus:
            values["job_slots"] = int(cpus)
        usage = [f"mem={mb}"] if mb else []
        usage += [f"tmp={disk_mb}"] if disk_mb else []
        request = f"rusage[{':'.join(usage)}]" if usage else ""
        if cpus and int(cpus) > 1:
            request = f"{request} span[hosts=1]".strip()
        if request:
            out["R"] = request
    elif any(v is not None for v in (cpus, memory, disk)) and system != "local":
        logger.warning("request_cpus, request_memory and request_disk mean nothing to the batch system %s; "
                       "give its own settings instead", system)
    return out
