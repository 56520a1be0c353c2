"""The files of one task's job: its spec, wrapper, logs, exit-code and result files.

Job files live in ``<task_file_dir>/<TaskFamily>/<task_id>/``, logs in
``<log_dir>/<parameters>/<TaskFamily>/``. The spec (``job.json``) says which task the job runs, so the
node-side entry point rebuilds exactly that task without walking the graph.
"""

from __future__ import annotations

import json
import os
import sys
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from b2batch import paths
from b2batch.settings import get_setting, settings_snapshot


@dataclass
class RunContext:
    """What a job needs to know of the steering process: the workflow script and its own arguments."""

    script: str | None = None
    argv: list[str] = field(default_factory=list)

    @classmethod
    def current(cls) -> RunContext:
        return _context

    def use(self) -> None:
        global _context
        _context = self


def _default_context() -> RunContext:
    main_file = getattr(sys.modules.get("__main__"), "__file__", None)
    return RunContext(script=str(Path(main_file).resolve()) if main_file else None, argv=[])


_context = _default_context()


def _atomic_write(path: Path, text: str, mode: int = 0o644) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(text)
    os.chmod(temporary, mode)
    os.replace(temporary, path)


@dataclass
class JobFiles:
    """Paths of one task's job files."""

    folder: Path
    log_folder: Path

    @classmethod
    def for_task(cls, task: Any) -> JobFiles:
        family_folder = paths.resolve(get_setting("task_file_dir", task=task)) / task.task_family
        return cls(folder=family_folder / task.task_id, log_folder=paths.log_folder(task))

    spec = property(lambda self: self.folder / "job.json")
    wrapper = property(lambda self: self.folder / "executable_wrapper.sh")
    exit_code = property(lambda self: self.folder / "exit_code")
    result = property(lambda self: self.folder / "result.json")
    stdout = property(lambda self: self.log_folder / "stdout")
    stderr = property(lambda self: self.log_folder / "stderr")

    def prepare(self, task: Any) -> None:
        """Write the spec and the wrapper of a new job, and remove what an earlier job of the task left."""
        from b2batch import wrapper  # rendering needs jinja: imported only on the steering side

        self.folder.mkdir(parents=True, exist_ok=True)
        self.log_folder.mkdir(parents=True, exist_ok=True)
        for stale in (self.exit_code, self.result):
            stale.unlink(missing_ok=True)
        for log in (self.stdout, self.stderr):  # the wrapper appends: start each job with empty logs
            if log.exists() and log.stat().st_size:
                os.replace(log, self.previous_log(log))
        context = RunContext.current()
        spec = {
            "task_module": task.task_module,
            "task_family": task.task_family,
            "task_params": task.to_str_params(),
            "script": context.script,
            "argv": context.argv,
            "base_dir": str(paths.base_dir()),
            "settings": settings_snapshot(),
            "result_file": str(self.result),
        }
        _atomic_write(self.spec, json.dumps(spec, indent=1, default=str))
        _atomic_write(self.wrapper, wrapper.render_wrapper(task, self), mode=0o755)

    @staticmethod
    def previous_log(log: Path) -> Path:
        """Where the log of the task's previous job is kept (one generation)."""
        return log.with_name(log.name + ".previous")

    submission = property(lambda self: self.folder / "submission.json")

    def record_submission(self, system: str, job_id: str) -> None:
        """Note the job in the run's journal: which batch system has it under which id, since when."""
        import socket
        import time

        record = {"system": system, "job_id": job_id, "submitted_at": time.time(), "host": socket.gethostname(),
                  "steering_pid": os.getpid()}
        _atomic_write(self.submission, json.dumps(record))

    def unfinished_submissions(self, system: str) -> list[str]:
        """Job ids of ``system`` in the journals of every task that shares this task's ``task_file_dir``
        whose job wrote no exit code yet: the jobs an earlier steering process may have left queued or
        running."""
        ids = []
        for journal in self.folder.parent.parent.glob("*/*/submission.json"):  # <dir>/<family>/<task_id>/
            try:
                record = json.loads(journal.read_text())
            except (OSError, ValueError):
                continue
            if record.get("system") == system and record.get("job_id") and not (journal.parent / "exit_code").exists():
                ids.append(str(record["job_id"]))
        return ids

    def read_submission(self) -> dict[str, Any] | None:
        try:
            return json.loads(self.submission.read_text())
        except (OSError, ValueError):
            return None

    def read_exit_code(self) -> int | None:
        try:
            return int(self.exit_code.read_text().strip())
        except (OSError, ValueError):
            return None

    def read_result(self) -> dict[str, Any] | None:
        try:
            return json.loads(self.result.read_text())
        except (OSError, ValueError):
            return None

    def stderr_tail(self, lines: int = 20) -> str:
        try:
            with open(self.stderr, errors="replace") as f:
                return "".join(deque(f, maxlen=lines)).rstrip()
        except OSError:
            return ""
