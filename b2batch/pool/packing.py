"""A pool's work dir stays small whatever the number of items: what ended is packed into a few files.

The engine gives every job a folder (its wrapper, call, exit code, result) and a log folder (stdout,
stderr); job arrays get a folder of their own (a dispatch script, the scheduler's logs). A pool keeps at
most its window of jobs in flight, and as each job ends :class:`Packer` appends what it left to three files
and removes its folders; an array's folder goes once none of its jobs is left. The work dir of a pool::

    outputs.jsonl      one line per ended job: its items, batch system, job id, resubmissions, state,
                       stdout, stderr, and the error with its traceback if an item raised
    results.pickles    one pickle per ended job: {"chunk", "start", "count", "answer"} (the job's answer,
                       as b2batch.pool.chunk_on_node pickled it)
    calls.pickles      the call of each job that did not end well, to run it again by hand
    shipped/           one file per call of the pool (map, imap, apply ...): its function, initializer and
                       initargs, pickled once; each job's call names it (b2batch.pool.chunk_on_node)
    jobs/ logs/ arrays/   the folders of the jobs still in flight

:func:`read_outputs` and :func:`read_answers` read them back.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import shlex
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from b2batch.engine import Job, JobFiles
from b2batch.engine.shared_logs import SharedLogs

logger = logging.getLogger(__name__)

OUTPUTS, RESULTS, CALLS = "outputs.jsonl", "results.pickles", "calls.pickles"
#: Most bytes of one job's stdout or stderr packed (the end is kept).
LOG_LIMIT = 1 << 20
#: Seconds between two looks at the array folders.
SWEEP_INTERVAL = 2.0
#: Bytes each packed file holds in memory until :meth:`Packer.flush`.
BUFFER = 1 << 16


def _read_log(files: JobFiles, name: str, shared: SharedLogs) -> str:
    data, size = files.read_log(name, LOG_LIMIT, shared)
    text = data.decode(errors="replace")
    if name == "stderr" and files.log_part(name) and text.startswith("b2batch: "):
        # a chunk's part of its pilot's stderr starts with the line naming it (its own log file has it in stdout
        # only): what the chunk wrote is what follows
        text = text.partition("\n")[2]
    return text if size <= LOG_LIMIT else f"[... {size - LOG_LIMIT} bytes left out ...]\n{text}"


def _remove_folder(folder: str) -> None:
    """Remove a job's folder: its files, then itself (shutil.rmtree for anything deeper, or left over)."""
    try:
        with os.scandir(folder) as found:
            entries = list(found)
    except FileNotFoundError:
        return
    except OSError:
        shutil.rmtree(folder, ignore_errors=True)
        return
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                os.unlink(entry.path)
        except OSError:  # gone meanwhile, or not ours to remove: rmtree below tries what is left
            pass
    try:
        os.rmdir(folder)
    except FileNotFoundError:
        pass
    except OSError:
        shutil.rmtree(folder, ignore_errors=True)


def _array_wrappers(dispatch: Path) -> list[Path]:
    """The job wrappers an array's dispatch script runs (``N) exec WRAPPER ;;``, see array_dispatch.sh.j2)."""
    found = []
    for line in dispatch.read_text().splitlines():
        head, separator, rest = line.partition(") exec ")
        if separator and head.strip().isdigit():
            words = shlex.split(rest.rsplit(";;", 1)[0])
            if words:
                found.append(Path(words[0]))
    return found


class Packer:
    """Packs the jobs of one pool's work dir as they end."""

    def __init__(self, work_dir: Path) -> None:
        self.work_dir = work_dir
        self.wrote_stderr = False
        self._files: dict[str, BinaryIO] = {}
        self._arrays: dict[Path, list[Path]] = {}
        self._swept_at = 0.0
        self._shared = SharedLogs()  # the pilots' logs, which hold the parts of the units that ran in them

    def _file(self, name: str) -> BinaryIO:
        if name not in self._files:
            # open while the pool lives; written out by flush(), once per burst of ended jobs
            self._files[name] = open(self.work_dir / name, "ab", buffering=BUFFER)  # noqa: SIM115
        return self._files[name]

    def pack(self, job: Job, meta: dict[str, Any], answer: bytes | None, state: str, error: str = "") -> None:
        """Append what ``job`` left (``meta``: its chunk; ``answer``: its pickled answer; ``state``: done,
        failed or lost; ``error``: its message and traceback), then remove its folders. A job that did not end
        well is written out at once (the error the pool raises names the file); others at the next
        :meth:`flush`."""
        stdout, stderr = _read_log(job.files, "stdout", self._shared), _read_log(job.files, "stderr", self._shared)
        self.wrote_stderr = self.wrote_stderr or bool(stderr.strip())
        line = {**meta, "system": job.system, "job_id": job.job_id, "resubmissions": job.resubmissions,
                "state": state, "error": error, "stdout": stdout, "stderr": stderr}
        outputs = self._file(OUTPUTS)
        outputs.write(json.dumps(line, default=str).encode() + b"\n")
        if answer is not None:
            results = self._file(RESULTS)
            pickle.dump({"chunk": meta.get("chunk"), "start": meta.get("start"), "count": meta.get("count"),
                         "answer": answer}, results)
        if state != "done":
            try:  # still in memory (a unit in a pilot never had a file), else its file
                call = job.inline[1] if job.inline is not None else (job.files.folder / "call.pkl").read_bytes()
            except OSError:
                call = b""
            calls = self._file(CALLS)
            pickle.dump({**meta, "job_id": job.job_id, "call": call}, calls)
            self.flush()
        if job.files.may_have_folder():
            _remove_folder(job.files.folder_text)
        if job.files.had_own_logs():
            _remove_folder(job.files.log_folder_text)

    def sweep(self, force: bool = False) -> None:
        """Remove the folders of arrays none of whose jobs is left (at most every SWEEP_INTERVAL s)."""
        now = time.monotonic()
        if not force and now - self._swept_at < SWEEP_INTERVAL:
            return
        self._swept_at = now
        try:
            folders = list((self.work_dir / "arrays").iterdir())
        except OSError:
            return
        for folder in folders:
            wrappers = self._arrays.get(folder)
            if wrappers is None:
                try:
                    wrappers = self._arrays[folder] = _array_wrappers(folder / "dispatch.sh")
                except OSError:
                    continue  # being written
            if not any(w.exists() for w in wrappers):
                shutil.rmtree(folder, ignore_errors=True)
                self._arrays.pop(folder, None)

    def flush(self) -> None:
        """Write out what was packed (the dispatcher: after each burst of ended jobs)."""
        for f in self._files.values():
            f.flush()

    def close(self) -> None:
        self._shared.close()
        for f in self._files.values():
            f.close()
        self._files.clear()


def read_outputs(work_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The packed lines of every ended job of a pool's work dir, in the order they ended."""
    path = Path(work_dir) / OUTPUTS
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def read_answers(work_dir: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """The packed answers of a pool's work dir: dicts with the chunk, its first item's index, its item count
    and the answer (a :class:`b2batch.pool.chunk_on_node.ChunkAnswer` once unpickled)."""
    path = Path(work_dir) / RESULTS
    if not path.exists():
        return
    with open(path, "rb") as f:
        while True:
            try:
                record = pickle.load(f)
            except EOFError:
                return
            record["answer"] = pickle.loads(record["answer"])
            yield record


def file_count(folder: str | os.PathLike[str]) -> int:
    """Files and folders below ``folder``."""
    return sum(len(dirs) + len(files) for _root, dirs, files in os.walk(folder))
