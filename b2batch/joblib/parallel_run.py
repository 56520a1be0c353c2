"""Starting and ending the jobs of one ``Parallel`` call: the batch system and its settings, pilots or jobs of
their own, the live progress in a terminal, and with ``export_metadata`` b2batch's run report and timeline.

The jobs take the shape ``job_shape`` asks for, ``auto`` by default: the rule every front-end uses
(:func:`b2batch.engine.pilots.shape_rule.decide`, ``docs/job-shapes.md``). joblib hands over ``n_jobs`` batches at a time
(within the throttle) and holds the rest back, so the call tells the run that window: short calls go to that many
pilots (at most 100, on ``local`` its slots), long ones to a job each. An explicit ``pilot_jobs`` or
``tasks_per_job`` wins with its value, as for tasks: ``pilot_jobs=0`` runs each unit as a job of its own.
"""

from __future__ import annotations

import io
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from b2batch.jobscript import base_folder
from b2batch import systems
from b2batch.calls.executor import KEEP_ENDED
from b2batch.engine import RunRecord
from b2batch.joblib import options as opts
from b2batch.joblib.call_batch import CallBatch
from b2batch.settings import get_setting

if TYPE_CHECKING:
    from b2batch.joblib.backend import B2BatchBackend

logger = logging.getLogger(__name__)


class Watch:
    """What is shown and written about one call: the live progress, the report."""

    def __init__(self, record: RunRecord, backend: B2BatchBackend, system: str,
                 live: dict[str, Any] | None = None) -> None:
        self.report: Any = None
        self.progress: Any = None
        options = backend.options
        if options.export_metadata:
            from b2batch.display.report import RunReport

            # The report's own summary goes to the log, not to the caller's stderr. The call's live state (its
            # level and throttle beside the counts) goes beside the calls' log folders (<log_dir>/joblib/), which
            # are removed at the end unless kept, for b2batch monitor.
            live = live or {}
            self.report = RunReport(run=record, batch=False, mode="batch", script=sys.argv[0] if sys.argv else None,
                                    argv=list(sys.argv[1:]), stream=io.StringIO(), log_folder=log_root(options),
                                    live_folder=live.get("folder"),
                                    live_info={"front_end": "joblib", "tag": live.get("call", ""),
                                               "joblib": {k: v for k, v in live.items() if k != "folder"}})
            self.report.__enter__()
        wanted = options.progress
        if wanted is None:
            from b2batch.display.progress import _is_terminal

            wanted = backend.level == 0 and _is_terminal(sys.stderr)
        if wanted:
            from b2batch.display.progress import Progress

            self.progress = Progress(record)
            self.progress.start()

    def close(self, failed: bool, cancelled: bool) -> None:
        if self.progress is not None:
            self.progress.stop()
        if self.report is not None:
            self.report.batch = True  # now write the files (batch=True at the start would show progress too)
            error = KeyboardInterrupt if cancelled else None
            self.report.__exit__(error, None, None)
            logger.info("b2batch joblib: report %s, timeline %s", self.report.paths.get("report"),
                        self.report.paths.get("trace"))


def log_root(options: opts.Options) -> Path:
    """The log folder under which calls put theirs (``joblib/<call>/``): the option's ``log_dir`` (a nested
    call gets its outer call's, absolute), else the setting's."""
    return base_folder.resolve(options.settings.get("log_dir") or get_setting("log_dir")).resolve()


def window(throttle: int | None, n_jobs: int) -> int:
    """The most units the call hands over at a time: joblib keeps ``n_jobs`` batches out (a negative ``n_jobs``:
    :data:`~b2batch.joblib.options.DISPATCH_ALL`), within the throttle; the shaping rule's ``window``."""
    return min(t for t in (throttle, n_jobs if n_jobs > 0 else opts.DISPATCH_ALL) if t)


def job_shape(options: opts.Options, values: dict[str, Any]) -> str:
    """The call's ``job_shape``: ``job_per_task`` where ``pilot_jobs`` or ``tasks_per_job`` is set (0 and 1:
    their values win, as for tasks), else the option's or the setting's."""
    chosen = {name: options.settings[name] if name in options.settings else get_setting(name, None)
              for name in ("pilot_jobs", "tasks_per_job")}
    if any(value is not None for value in chosen.values()):
        return "job_per_task"
    return str(values.get("job_shape") or get_setting("job_shape"))


def start_batch(backend: B2BatchBackend) -> CallBatch:
    """The jobs of the call that starts, with their settings; nothing is submitted yet."""
    options = backend.options
    level = backend.level
    n_jobs = backend.n_jobs_requested
    cls = systems.system_class(options.system())
    system = str(getattr(cls, "name", None) or options.system())
    values = opts.job_settings(options, system)
    values["batch_system"] = system
    throttle = options.throttle_at(level, n_jobs)
    values["job_shape"] = shape = job_shape(options, values)
    pilots = values.get("pilot_jobs", get_setting("pilot_jobs"))
    name = backend.new_batch_name()
    folder = backend.shared_data_dir() / name
    folder.mkdir(parents=True, exist_ok=True)
    if options.log_dir_prefix:
        log_folder = Path(os.path.expanduser(os.fspath(options.log_dir_prefix))).resolve()
    else:
        log_folder = log_root(options) / "joblib" / name
    values["task_file_dir"] = str(folder)  # the pilots' queue of this call lives in its folder
    values["log_dir"] = str(log_folder)  # and their logs beside those of the units
    record = RunRecord(keep_ended=KEEP_ENDED)
    watch = Watch(record, backend, system,
                  live={"folder": log_root(options) / "joblib", "call": name, "level": level, "throttle": throttle})
    # Calls are packed into units of about UNIT_SECONDS where units may share a job: in pilots.
    coalesce = options.batch_size == "auto" and (bool(pilots) or shape in ("auto", "pilots"))
    try:
        batch = CallBatch(name=name, system=system, settings=values, folder=folder, log_folder=log_folder,
                          keep_logs=bool(options.log_dir_prefix), level=level, throttle=throttle,
                          batch_size=options.batch_size, coalesce=coalesce,
                          delete_task_file_on_load=options.delete_task_file_on_load, log_level=options.log_level(),
                          context_func=options.context_func, record=record, window=window(throttle, n_jobs),
                          frontend=backend.frontend_name,
                          more=backend.one_more_batch if n_jobs < 0 else None)
    except BaseException:
        watch.close(failed=True, cancelled=True)
        raise
    batch.watch = watch  # type: ignore[attr-defined]
    logger.info("b2batch joblib: call %s on %s (%s), task files in %s, logs in %s", name, system,
                f"{pilots} pilot jobs at most" if pilots else f"job_shape {shape}", folder, log_folder)
    return batch


def stop_batch(batch: CallBatch, cancel: bool) -> None:
    """End the call's jobs (cancelling them with ``cancel``), remove its folder, write its report."""
    logger.debug("%s: ending the call%s", batch.name, " (cancelling its jobs)" if cancel else "")
    try:
        batch.close(cancel=cancel)
        logger.debug("%s: its jobs ended", batch.name)
    finally:
        batch.watch.close(failed=batch.failed, cancelled=cancel)  # type: ignore[attr-defined]
