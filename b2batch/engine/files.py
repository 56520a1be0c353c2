"""The files of one job, and the one place that knows the layout of job folders.

A job's files live in its job folder, ``<task_file_dir>/<family>/<key>/`` (a front-end may choose another place
under its task_file_dir, such as b2luigi's ``<parameters>/<family>/``; :func:`job_folders` finds both): the wrapper the batch system runs
(``executable_wrapper.sh``), the front-end's description of the work (``job.json``), the exit code the
wrapper writes (``exit_code``), the work's result (``result.json``) and the journal of the submission
(``submission.json``), and before that what was about to be submitted (``submitting.json``: the tag the batch
job carries, so that a later steering process finds a job whose submission it did not see end). Its logs live in a folder the front-end chooses (``stdout``, ``stderr``, and the
previous job's as ``.previous``).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from b2batch.engine.processes import host_name

if TYPE_CHECKING:
    from b2batch.engine.shared_logs import SharedLogs


_HOST = host_name()


def atomic_write(path: Path, text: str, mode: int = 0o644) -> None:
    """Write ``text`` to ``path`` so that a reader sees the old file or the whole new one."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(text)
    os.chmod(temporary, mode)
    os.replace(temporary, path)


def _write_new(path: str, text: str, mode: int = 0o644) -> None:
    """Write a file that no job may be reading: at once when it is new, else by an atomic replace (a running
    job of an earlier run may be reading the old one; a shell reads its script while it runs)."""
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    except FileExistsError:
        atomic_write(Path(path), text, mode)
        return
    try:
        data = memoryview(text.encode())
        while data:  # plain system calls: a pilot's unit has its journal written in the steering process
            data = data[os.write(descriptor, data):]
    finally:
        os.close(descriptor)


#: The files of a job folder, by the name JobFiles gives each (its attribute, and :meth:`JobFiles.path_of`).
FILE_NAMES = {"spec": "job.json", "wrapper": "executable_wrapper.sh", "exit_code": "exit_code", "result": "result.json",
              "result_bytes": "result.pkl", "submission": "submission.json", "setup_failed": "setup_failed",
              "cancelled": "cancelled", "checkpointed": "checkpointed", "usage": "usage.json",
              "intent": "submitting.json", "process": "process"}


class Launch(NamedTuple):
    """What a job's wrapper does when it does no more than export ``env``, change into ``working_dir`` and run
    ``command`` (the interpreter running the steering process on the node-side entry point, so ``command`` leaves
    the interpreter out): what the local batch system does itself for a job it forks
    (:mod:`b2batch.systems.local_forks`). Its ``label`` is the wrapper's name for the job."""

    label: str
    working_dir: str
    env: tuple[tuple[str, str], ...]
    command: tuple[str, ...]


def job_folders(root: str | os.PathLike[str], marker: str = FILE_NAMES["spec"]) -> list[Path]:
    """The job folders under ``root`` (a task_file_dir) that hold the file ``marker``, sorted, at any depth: the
    folders of a job folder are not searched, nor those of the run itself at the top (the work queues of pilots
    and bundles, ``_<kind>s``, and ``arrays``)."""
    top = os.fspath(root)
    found, stack = [], [top]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as entries:
                entries = list(entries)
        except OSError:
            continue
        names = {entry.name for entry in entries}
        if marker in names:
            found.append(Path(folder))
        if marker in names or FILE_NAMES["spec"] in names:
            continue
        at_top = folder == top
        stack += [entry.path for entry in entries if entry.is_dir(follow_symlinks=False)
                  and not (at_top and _run_folder(entry.name))]
    return sorted(found)


def _run_folder(name: str) -> bool:
    """Whether the folder ``name`` at the top of a task_file_dir is the run's own (a work queue of pilots or
    bundles, ``_<kind>s``, or ``arrays``), not a task's."""
    return name.startswith("_") or name == "arrays"


_UNKNOWN = object()  # a result not handed over in a worker's log line: read from its file


def _as_path_text(path: str | os.PathLike[str]) -> str:
    """``str(Path(path))`` without making a Path when the text is already in that form (a run makes these for
    every job)."""
    text = os.fspath(path)
    if text and "//" not in text and "/." not in text and not text.startswith("./") and text != "." and (
            text == "/" or not text.endswith("/")):
        return text
    return str(Path(text))


def _file(name: str) -> property:
    file_name = FILE_NAMES[name]
    return property(lambda self: Path(self._folder, file_name), doc=f"The job's {file_name}.")


def _read_text(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


class JobFiles:
    """Paths of one job's files.

    A run holds one of these per job for as long as it runs (100,000 and more), so it keeps two strings and
    makes each ``Path`` when asked (``folder``, ``spec`` ...), and the engine's own reads and writes use
    :meth:`path_of`'s text.
    """

    __slots__ = ("_folder", "_log_folder", "fresh", "_made", "_exit", "_result", "_parts", "launch")

    def __init__(self, folder: str | os.PathLike[str], log_folder: str | os.PathLike[str]) -> None:
        # as Path would print them (no doubled or trailing slash), kept as text
        self._folder = _as_path_text(folder)
        self._log_folder = _as_path_text(log_folder)
        #: Whether this object made the job folder and no job of it was prepared since: it then holds nothing
        #: of an earlier job (no journal, exit code or result to look for or remove).
        self.fresh = False
        self._made = False
        #: The exit code once read: a job writes it last and once; reset() forgets it for the next job.
        self._exit: int | None = None
        #: The result as its unit handed it to its worker (the worker's log line), instead of ``result.json``.
        self._result: Any = _UNKNOWN
        #: Where a unit that wrote into its worker's logs (the run's ``unit_logs`` "pilot") put its stdout and
        #: stderr: name -> (the worker's log file, first byte, end); None: the job's own log files.
        self._parts: dict[str, tuple[str, int, int]] | None = None
        #: What the job's wrapper does, when the local system may do it itself (set with the wrapper; None: the
        #: wrapper does more, or none was written by this process).
        self.launch: Launch | None = None

    @classmethod
    def at(cls, task_file_dir: str | os.PathLike[str], family: str, key: str,
           log_folder: str | os.PathLike[str]) -> JobFiles:
        """The files of the job ``key`` of ``family`` under ``task_file_dir``."""
        return cls(folder=f"{_as_path_text(task_file_dir)}/{family}/{key}", log_folder=log_folder)

    def __repr__(self) -> str:
        return f"JobFiles(folder={self._folder!r}, log_folder={self._log_folder!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, JobFiles):
            return NotImplemented
        return (self.folder, self.log_folder) == (other.folder, other.log_folder)

    def __hash__(self) -> int:
        return hash((self._folder, self._log_folder))

    @property
    def folder(self) -> Path:
        """The job folder."""
        return Path(self._folder)

    @property
    def log_folder(self) -> Path:
        """The folder of the job's stdout and stderr."""
        return Path(self._log_folder)

    spec = _file("spec")
    wrapper = _file("wrapper")
    exit_code = _file("exit_code")
    result = _file("result")
    #: The work's result when it is not JSON (e.g. a pickled value of a Python call).
    result_bytes = _file("result_bytes")
    submission = _file("submission")
    #: Written by the wrapper when the job's own set-up (env_script, working_dir) failed, with the reason.
    setup_failed = _file("setup_failed")
    #: Written when the job was cancelled on purpose (its run interrupted, ``b2batch cancel``), with the reason.
    cancelled = _file("cancelled")
    #: Written by the work when it saved a checkpoint on the batch system's warning and asks to be requeued.
    checkpointed = _file("checkpointed")
    #: What the job's wrapper (or a unit's worker) measured it used (engine/usage.py).
    usage = _file("usage")

    @property
    def stdout(self) -> Path:
        """The job's stdout log (a unit's in its worker's logs: that file, see :meth:`log_part`)."""
        return Path(self._parts["stdout"][0] if self._parts else f"{self._log_folder}/stdout")

    @property
    def stderr(self) -> Path:
        """The job's stderr log (a unit's in its worker's logs: that file, see :meth:`log_part`)."""
        return Path(self._parts["stderr"][0] if self._parts else f"{self._log_folder}/stderr")

    @property
    def folder_text(self) -> str:
        """The job folder as text (the string this object keeps: no copy)."""
        return self._folder

    @property
    def log_folder_text(self) -> str:
        """The log folder as text (the string this object keeps: no copy)."""
        return self._log_folder

    def log_path(self, name: str) -> str:
        """The path of the job's log ``name`` (``stdout`` or ``stderr``) as text."""
        return f"{self._log_folder}/{name}"

    def path_of(self, name: str) -> str:
        """The path of the job's file ``name`` (one of :data:`FILE_NAMES`: ``spec``, ``exit_code`` ...) as text: no
        Path object is made or kept (these are read and written for every job)."""
        return f"{self._folder}/{FILE_NAMES[name]}"

    def wrapper_paths(self) -> tuple[str, str, str, str, str]:
        """What a job's wrapper writes to, as text: its log folder, stdout, stderr, exit-code file and set-up
        failure file."""
        logs = self._log_folder
        return logs, f"{logs}/stdout", f"{logs}/stderr", self.path_of("exit_code"), self.path_of("setup_failed")

    def make_folders(self) -> None:
        """Create the job folder (once per JobFiles object). The log folder is the job's to create: a
        wrapper makes it on the node, so that the submit host creates one folder per job, not three."""
        if self._made:
            return
        try:
            os.mkdir(self._folder)
            self.fresh = True
        except FileExistsError:
            pass
        except FileNotFoundError:
            os.makedirs(self._folder, exist_ok=True)
            self.fresh = True
        self._made = True

    def reset(self, make: bool = True) -> None:
        """Before a new job: remove what an earlier job left (exit code, result, set-up failure) and keep its
        logs as ``.previous``, so that each job starts with empty logs. ``make`` False: a job whose folder is
        made only if it needs one (:attr:`~b2batch.engine.job.Job.inline`): none made yet, nothing to remove."""
        self._exit = None
        self._result = _UNKNOWN
        self._parts = None
        if not make and not self._made:
            return
        self.make_folders()
        if not self.fresh:
            for stale in (self.exit_code, self.result, self.result_bytes, self.setup_failed, self.cancelled,
                          self.checkpointed, self.folder / "usage.json", self.folder / "peak_rss",
                          self.folder / "process"):
                stale.unlink(missing_ok=True)
        self.fresh = False
        for name in ("stdout", "stderr"):
            log = self.log_path(name)
            try:
                if os.stat(log).st_size:
                    os.replace(log, self.previous_log(log))
            except FileNotFoundError:
                pass

    def write_spec(self, spec: dict[str, Any]) -> None:
        _write_new(self.path_of("spec"), json.dumps(spec, default=str))  # no indent: json's C encoder, 10x faster

    def write_wrapper(self, text: str) -> None:
        _write_new(self.path_of("wrapper"), text, mode=0o755)

    @staticmethod
    def previous_log(log: str | os.PathLike[str]) -> Path:
        """Where the log of the previous job is kept (one generation)."""
        return Path(f"{os.fspath(log)}.previous")

    def record_submission(self, system: str, job_id: str, placement: dict[str, Any] | None = None) -> None:
        """Note the job in the run's journal: which batch system has it under which id (and where), since
        when."""
        record = {"system": system, "job_id": job_id, "submitted_at": time.time(), "host": _HOST,
                  "steering_pid": os.getpid(), **(placement or {})}
        # A new journal is written at once: a crash while writing it is no worse than one just before (after
        # the batch system took the job); a journal of an earlier job is replaced atomically.
        _write_new(self.path_of("submission"), json.dumps(record))

    def record_intent(self, system: str, submission: str, index: int | None,
                      extra: dict[str, Any] | None = None) -> None:
        """Note, before the batch system is asked, what is about to be submitted for this job: to ``system``, as
        the batch job tagged ``submission`` (its name, or an attribute), element ``index`` of that array (None:
        a job of its own). A steering process killed before it could write the journal leaves this behind, and
        the next one asks the batch system for the tag (:meth:`read_intent`)."""
        record = {"system": system, "submission": submission, "index": index, "intended_at": time.time(),
                  "host": _HOST, "steering_pid": os.getpid(), **(extra or {})}
        _write_new(self.path_of("intent"), json.dumps(record))

    def read_intent(self) -> dict[str, Any] | None:
        """The last intent recorded (:meth:`record_intent`) if the journal does not name its submission and is not
        newer (a journal without an intent: another batch system's): a submission that began and whose end no
        steering process saw; None otherwise."""
        if self.fresh:
            return None
        try:
            intent = json.loads(_read_text(self.path_of("intent")))
        except (OSError, ValueError):
            return None
        journal = self.read_submission()
        if not isinstance(intent, dict):
            return None
        if journal and (journal.get("submission") == intent.get("submission")
                        or journal.get("submitted_at", 0) >= intent.get("intended_at", 0)):
            return None
        return intent

    def unfinished_submissions(self, system: str, task_file_dir: str | os.PathLike[str] | None = None) -> list[str]:
        """Job ids of ``system`` in the journals of every job that shares this job's ``task_file_dir`` (default:
        the folder two above the job folder's) and wrote no exit code yet: the jobs an earlier steering process
        may have left queued or running."""
        root = self.folder.parent.parent  # <dir>/<family>/<key>/, also a pilot's or bundle's own job
        if task_file_dir is not None and self.folder.is_relative_to(task_file_dir):
            top = self.folder.relative_to(task_file_dir).parts[0]
            if not _run_folder(top):
                root = Path(task_file_dir)
        ids = []
        for folder in job_folders(root, FILE_NAMES["submission"]):
            journal = folder / FILE_NAMES["submission"]
            try:
                record = json.loads(journal.read_text())
            except (OSError, ValueError):
                continue
            ended = (journal.parent / FILE_NAMES["exit_code"]).exists()
            if record.get("system") == system and record.get("job_id") and not ended:
                ids.append(str(record["job_id"]))
        return ids

    def stand_in_for_wrapper(self, succeeded: bool, result: dict[str, Any]) -> None:
        """A job whose command was not b2batch's wrapper (a plugin that submitted a command of its own) wrote no exit
        code: write the exit code (0 when ``succeeded``, else 1) and ``result`` that the wrapper would have
        written, so that its outcome is read as any job's. Nothing is written when the job wrote an exit code."""
        if self.read_exit_code() is not None:
            return
        atomic_write(Path(self.path_of("result")), json.dumps(result))
        atomic_write(Path(self.path_of("exit_code")), "0\n" if succeeded else "1\n")

    def read_submission(self) -> dict[str, Any] | None:
        if self.fresh:
            return None
        try:
            return json.loads(_read_text(self.path_of("submission")))
        except (OSError, ValueError):
            return None

    def known_exit_code(self, code: int) -> None:
        """The exit code the job wrote to its file, as its writer also said elsewhere (a pilot's log): read
        from there, not from the file again."""
        self._exit = code

    def read_exit_code(self) -> int | None:
        if self._exit is not None:
            return self._exit
        try:
            self._exit = int(_read_text(self.path_of("exit_code")).strip())
        except (OSError, ValueError):
            return None
        return self._exit

    def record_cancel(self, reason: str) -> None:
        """Note that the job was cancelled on purpose, and why (a later run says so instead of "failed")."""
        try:
            atomic_write(self.cancelled, reason + "\n")
        except OSError:  # the folder is gone: nobody will ask
            pass

    def read_cancel(self) -> str:
        """Why the job was cancelled (empty if it was not)."""
        try:
            return _read_text(self.path_of("cancelled")).strip()
        except OSError:
            return ""

    def read_checkpointed(self) -> str:
        """Why the work saved a checkpoint and asked to be requeued (empty if it did not)."""
        try:
            return self.checkpointed.read_text().strip()
        except OSError:
            return ""

    def read_setup_failure(self) -> str:
        """Why the job's own set-up failed (empty if it did not)."""
        try:
            return _read_text(self.path_of("setup_failed")).strip()
        except OSError:
            return ""

    def known_result(self, result: dict[str, Any] | None) -> None:
        """The result the job's unit handed to its worker, which said it in its log line (None: the unit has no
        result): taken from there, no ``result.json`` is looked for."""
        self._result = result

    def read_result(self) -> dict[str, Any] | None:
        if self._result is not _UNKNOWN:
            return self._result
        try:
            return json.loads(_read_text(self.path_of("result")))
        except (OSError, ValueError):
            return None

    def known_log_parts(self, parts: Any) -> None:
        """Where the job's unit wrote into its worker's logs, as its worker's log line says: ``{"stdout": [file,
        first byte, end], "stderr": [...]}`` (anything else is ignored: the job's own log files count)."""
        try:
            found = {name: (str(parts[name][0]), int(parts[name][1]), int(parts[name][2]))
                     for name in ("stdout", "stderr")}
        except (KeyError, IndexError, TypeError, ValueError):
            return
        self._parts = found

    def log_part(self, name: str) -> tuple[str, int, int] | None:
        """The unit's part of its worker's log ``name`` (``stdout`` or ``stderr``): (file, first byte, end); None
        when the job has log files of its own."""
        return self._parts[name] if self._parts else None

    def read_log(self, name: str, limit: int, shared: SharedLogs | None = None) -> tuple[bytes, int]:
        """The last ``limit`` bytes of the job's log ``name`` (its part of its worker's log, for a unit that
        wrote there: read through ``shared`` when given) and how many bytes it has in all; (b"", 0) when there
        is none."""
        part = self.log_part(name)
        try:
            if part:
                path, first, size = part[0], part[1], max(0, part[2] - part[1])
                if size and shared is not None:
                    return shared.read(path, first + max(0, size - limit), min(size, limit)), size
            else:  # most jobs write little or nothing: one system call for an empty log
                path, first, size = self.log_path(name), 0, os.stat(self.log_path(name)).st_size
            if not size:
                return b"", 0
            with open(path, "rb") as f:
                f.seek(first + max(0, size - limit))
                return f.read(min(size, limit)), size
        except OSError:
            return b"", 0

    def had_own_logs(self) -> bool:
        """Whether the job's unit may have written log files of its own (it did not write into its worker's)."""
        return self._parts is None

    def may_have_folder(self) -> bool:
        """Whether the job folder may exist: made here, or on the node for a result too big for the unit's line
        (a unit that handed its result in its worker's log line made none)."""
        return self._made or self._result is _UNKNOWN

    def stderr_tail(self, lines: int = 20) -> str:
        """The last ``lines`` lines of the job's stderr (of at most its last 64 KiB)."""
        data, _size = self.read_log("stderr", 64 * 1024)
        return "\n".join(data.decode(errors="replace").splitlines()[-lines:]).rstrip()
