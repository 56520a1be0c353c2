"""The work dir of a task list: which lines are left, running, finished or failed, shared by every farmer.

PyTaskFarmer's files, with its formats, so that either tool can continue the other's work dir:

- ``toprocess``: the lines not started yet, ``<id> <line>``. Written from the last id to the first: a farmer
  takes the next lines from the end of the file and truncates it, at a constant cost per line whatever the
  list's length (PyTaskFarmer reads the file as a set and rewrites it whole for every line). A line put
  back is appended, so it runs next.
- ``finished`` and ``failed``: ``<id> <line>`` for each line that exited 0, or not.
- ``logs/log_<id>``: the output of each line; ``timeline.json``: Chrome-trace "X" events (µs).

b2batch's own files are in ``b2batch/``: ``tasklist.json`` (the number of tasks and their hash),
``exit_codes`` (``<id> <code>``), and in ``claims/`` one journal per farmer of the lines it took (``+<id>``),
the process group that runs each (``p <id> <pgid>``, for people) and those it gave back or ended (``-<id>``), beside
its heartbeat (``<farmer>.json``, touched regularly). A farmer whose heartbeat is older than the heartbeat
timeout, or whose process is gone from this host, is dead: its lines go back to ``toprocess`` (on this host,
what it left running is killed first).

Every change happens under one lock: ``<workdir>/lock``, or ``<lock dir>/<md5 of the work dir>_lock`` where
the work dir's file system has no working locks (PyTaskFarmer's ``$SCRATCH`` lock location).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import signal
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import psutil

from b2batch.engine.processes import host_name, note_lives
from b2batch.farm.definitions import FarmError
from b2batch.farm.id_files import append_to_list, count_lines, ids_of, ids_text, lines_of, replace_file, tail_ids
from b2batch.farm.tasklist import tasks_hash

logger = logging.getLogger(__name__)

HOST = host_name()
#: Seconds a farmer waits for the work dir's lock before it gives up with an error.
LOCK_TIMEOUT = 300.0
#: The environment variable that marks the processes of a work dir's tasks (to find those a dead farmer left).
MARK = "B2BATCH_FARM_WORKDIR"


def lock_path(workdir: str | Path, lock_dir: str | Path | None = None) -> Path:
    """The lock file of ``workdir``: in it, or in ``lock_dir`` named by the md5 of its absolute path."""
    if not lock_dir:
        return Path(workdir) / "lock"
    digest = hashlib.md5(os.path.abspath(workdir).encode()).hexdigest()
    return Path(lock_dir) / f"{digest}_lock"


class WorkDir:
    """The files of one work dir, and the operations on them (those named ``*_locked`` need the lock held)."""

    def __init__(self, path: str | Path, lock_dir: str | Path | None = None, heartbeat_timeout: float = 60.0,
                 ) -> None:
        self.path = Path(path).absolute()
        self.toprocess = self.path / "toprocess"
        self.finished = self.path / "finished"
        self.failed = self.path / "failed"
        self.logs = self.path / "logs"
        self.timeline = self.path / "timeline.json"
        self.own = self.path / "b2batch"
        self.claims = self.own / "claims"
        self.record = self.own / "tasklist.json"
        self.exit_codes = self.own / "exit_codes"
        self.lock_file = lock_path(self.path, lock_dir)
        self.heartbeat_timeout = heartbeat_timeout
        self._lock_fd: int | None = None
        self._journals: dict[str, Any] = {}

    def log(self, task_id: int) -> Path:
        return self.logs / f"log_{task_id}"

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the work dir's lock: ``flock`` on the lock file, the lock PyTaskFarmer takes too (so that both
        can share a work dir). The file stays open for the process's life; only the lock comes and goes."""
        if self._lock_fd is None:
            try:
                self._lock_fd = os.open(self.lock_file, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            except OSError as e:
                raise FarmError(f"Cannot create the lock file {self.lock_file}: {e}. Choose a writable directory "
                                f"with --lock-dir.") from None
        deadline = pause = 0.0
        while True:
            try:
                fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                pass
            except OSError as e:
                raise FarmError(f"Cannot lock {self.lock_file}: {e}. The file system may have no locks: choose a "
                                f"lock directory on one that has (--lock-dir), shared by all farmers of "
                                f"{self.path}.") from None
            now = time.monotonic()
            deadline = deadline or now + LOCK_TIMEOUT
            if now > deadline:
                raise FarmError(f"Could not lock {self.lock_file} within {LOCK_TIMEOUT:g} s. Another farmer may "
                                f"hang holding it, or the file system has no working locks: choose a lock "
                                f"directory on a file system with locks (--lock-dir), shared by all farmers of "
                                f"{self.path}.")
            pause = min(0.05, pause * 2 or 0.0005)
            time.sleep(pause)
        try:
            yield
        finally:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    def close(self) -> None:
        for f in self._journals.values():
            f.close()
        self._journals.clear()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    # --- set-up ---------------------------------------------------------------------------------------------

    def prepare(self, tasks: Sequence[str], source: str) -> str:
        """Make the work dir for ``tasks`` (read from ``source``), or check that it was made for them; a note
        on what was found. A changed list is refused, a list that only grew at its end is taken up."""
        for folder in (self.path, self.logs, self.claims):
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise FarmError(f"Cannot create the work dir {folder}: {e}. Choose another --workdir.") from None
        if self.lock_file.parent != self.path:
            try:
                self.lock_file.parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise FarmError(f"Cannot create the lock directory {self.lock_file.parent}: {e}. Fix "
                                f"--lock-dir.") from None
        with self.locked():
            return self._prepare_locked(tasks, source)

    def _prepare_locked(self, tasks: Sequence[str], source: str) -> str:
        record = self.read_record()
        note = ""
        if record is not None:
            count = int(record["count"])
            if len(tasks) < count or tasks_hash(tasks, count) != record["sha256"]:
                raise FarmError(
                    f"The task list {source} changed since the work dir {self.path} was started from it "
                    f"({record.get('path', '?')}: {count} tasks then, {len(tasks)} now, and the first "
                    f"{min(count, len(tasks))} are not the same). Task ids would point to other lines. Restore "
                    f"the list, or start afresh with another --workdir (or remove {self.path}). Adding lines "
                    f"at the end of a list is allowed.")
            if len(tasks) > count:
                self._add_locked(range(count, len(tasks)), tasks)
                note = f"the task list grew from {count} to {len(tasks)} tasks: the new ones were added"
        else:
            self._check_status_files(tasks, source)
            if not self.toprocess.exists():
                done = set(ids_of(self.finished)) | set(ids_of(self.failed)) | self._claimed_by_anyone()
                self.write_toprocess_locked((i for i in range(len(tasks)) if i not in done), tasks)
        self._write_record(tasks, source)
        return note

    def _check_status_files(self, tasks: Sequence[str], source: str) -> None:
        """A work dir without b2batch's record (e.g. PyTaskFarmer's): each of its lines must name the same
        command under the same id."""
        for path in (self.toprocess, self.finished, self.failed):
            for task_id, command in lines_of(path):
                if task_id >= len(tasks) or tasks[task_id] != command:
                    now = repr(tasks[task_id]) if task_id < len(tasks) else "no such task"
                    raise FarmError(
                        f"The work dir {self.path} does not belong to the task list {source}: {path.name} has "
                        f"task {task_id} as {command!r}, the list has {now}. Use the work dir of this list "
                        f"(--workdir), or start afresh with a new one.")

    def read_record(self) -> dict[str, Any] | None:
        try:
            return json.loads(self.record.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            raise FarmError(f"{self.record} is unreadable ({e}); remove it to check the work dir against the "
                            f"task list again.") from None

    def _write_record(self, tasks: Sequence[str], source: str) -> None:
        record = {"path": os.path.abspath(source), "count": len(tasks), "sha256": tasks_hash(tasks)}
        if self.read_record() != record:
            temporary = self.record.with_name(f".tasklist.{os.getpid()}.tmp")
            temporary.write_text(json.dumps(record) + "\n")
            os.replace(temporary, self.record)

    def _add_locked(self, ids: Iterable[int], tasks: Sequence[str]) -> None:
        """Put new ids in front of ``toprocess`` (they run after what waits already)."""
        try:
            existing = self.toprocess.read_bytes()
        except FileNotFoundError:
            existing = b""
        head = "".join(f"{i} {tasks[i]}\n" for i in sorted(ids, reverse=True)).encode("utf-8", "surrogateescape")
        replace_file(self.toprocess, head + existing)

    def write_toprocess_locked(self, ids: Iterable[int], tasks: Sequence[str]) -> None:
        text = "".join(f"{i} {tasks[i]}\n" for i in sorted(set(ids), reverse=True))
        replace_file(self.toprocess, text.encode("utf-8", "surrogateescape"))

    # --- farmers --------------------------------------------------------------------------------------------

    def register(self, farmer: str, info: dict[str, Any]) -> None:
        """Start the heartbeat and the claims journal of ``farmer`` (heartbeat first: a journal without one
        belongs to a dead farmer)."""
        (self.claims / f"{farmer}.json").write_text(json.dumps(info))
        (self.claims / farmer).touch()

    def beat(self, farmer: str) -> None:
        os.utime(self.claims / f"{farmer}.json")

    def unregister(self, farmer: str) -> None:
        """The farmer ends with none of its lines running."""
        journal = self._journals.pop(farmer, None)
        if journal is not None:
            journal.close()
        for path in (self.claims / farmer, self.claims / f"{farmer}.json"):
            path.unlink(missing_ok=True)

    def journal(self, farmer: str, text: str) -> None:
        """Append to a farmer's journal (kept open for the farmer's own, unbuffered)."""
        f = self._journals.get(farmer)
        if f is None:
            f = open(self.claims / farmer, "a", encoding="utf-8", buffering=1)  # noqa: SIM115  (kept open)
            if len(self._journals) < 4:
                self._journals[farmer] = f
            else:
                with f:
                    f.write(text)
                return
        f.write(text)
        f.flush()

    # --- lines ----------------------------------------------------------------------------------------------

    def claim_locked(self, farmer: str, count: int) -> list[int]:
        """Take up to ``count`` lines from the end of ``toprocess`` for ``farmer``; their ids."""
        if count <= 0:
            return []
        try:
            fd = os.open(self.toprocess, os.O_RDWR)
        except FileNotFoundError:
            return []
        try:
            size = os.fstat(fd).st_size
            ids, cut = tail_ids(fd, size, count, self.toprocess)
            os.ftruncate(fd, cut)
        finally:
            os.close(fd)
        if ids:
            self.journal(farmer, "".join(f"+{i}\n" for i in ids))
        return ids

    def release_locked(self, farmer: str, ids: Sequence[int], tasks: Sequence[str]) -> None:
        """Put lines of ``farmer`` back at the end of ``toprocess`` (they run next)."""
        if not ids:
            return
        with open(self.toprocess, "ab") as f:
            f.write("".join(f"{i} {tasks[i]}\n" for i in ids).encode("utf-8", "surrogateescape"))
        self.journal(farmer, "".join(f"-{i}\n" for i in ids))

    def finish_locked(self, farmer: str, results: Sequence[tuple[int, int]], tasks: Sequence[str]) -> None:
        """Record lines that ended: ``(id, exit code)``."""
        if not results:
            return
        finished = [f"{i} {tasks[i]}\n" for i, code in results if code == 0]
        failed = [f"{i} {tasks[i]}\n" for i, code in results if code != 0]
        for path, lines in ((self.finished, finished), (self.failed, failed)):
            if lines:
                with open(path, "ab") as f:
                    f.write("".join(lines).encode("utf-8", "surrogateescape"))
        with open(self.exit_codes, "a", encoding="utf-8") as f:
            f.write("".join(f"{i} {code}\n" for i, code in results))
        self.journal(farmer, "".join(f"-{i}\n" for i, _ in results))

    # --- dead farmers ---------------------------------------------------------------------------------------

    def dead_farmers(self, me: str) -> list[str]:
        """Farmers (other than ``me``) with a journal whose heartbeat is stale or whose process is gone."""
        dead = []
        now = time.time()
        for journal in self.claims.iterdir():
            name = journal.name
            if name.endswith(".json") or name.startswith(".") or name == me:
                continue
            beat = self.claims / f"{name}.json"
            try:
                info = json.loads(beat.read_text())
                age = now - beat.stat().st_mtime
            except (OSError, ValueError):
                dead.append(name)  # no heartbeat: it died starting
                continue
            # the engine's judgement of a note's process (engine/processes.py), as for a pilot queue's steering
            if age > self.heartbeat_timeout or not note_lives(info, started="create_time"):
                dead.append(name)
        return dead

    def recover_locked(self, me: str, tasks: Sequence[str]) -> list[int]:
        """Give the lines of dead farmers back to ``toprocess``; their ids."""
        dead = self.dead_farmers(me)
        if not dead:
            return []
        done = set(ids_of(self.finished)) | set(ids_of(self.failed)) | set(ids_of(self.toprocess))
        recovered: list[int] = []
        for name in dead:
            held, _ = self._held(name)
            held -= done
            info = self._info(name)
            if info.get("host", HOST) == HOST:
                _kill_orphans(held, str(self.path))
            back = sorted(i for i in held if i < len(tasks))
            if back:
                logger.warning("Farmer %s (pid %s on %s) is gone: putting its %d running line(s) back: %s", name,
                               info.get("pid", "?"), info.get("host", "?"), len(back), ids_text(back))
                self.release_locked(name, back, tasks)
            recovered.extend(back)
            done.update(back)
            self.unregister(name)
        return recovered

    def _info(self, farmer: str) -> dict[str, Any]:
        try:
            return json.loads((self.claims / f"{farmer}.json").read_text())
        except (OSError, ValueError):
            return {}

    def _held(self, farmer: str) -> tuple[set[int], dict[int, int]]:
        """The ids a farmer's journal says it holds, and the process groups of their runs."""
        held: set[int] = set()
        groups: dict[int, int] = {}
        try:
            text = (self.claims / farmer).read_text()
        except OSError:
            return held, groups
        for line in text.splitlines():
            try:
                if line.startswith("+"):
                    held.add(int(line[1:]))
                elif line.startswith("-"):
                    held.discard(int(line[1:]))
                elif line.startswith("p "):
                    _, task_id, group = line.split()
                    groups[int(task_id)] = int(group)
            except ValueError:
                continue  # a line cut by the farmer's death
        return held, groups

    def _claimed_by_anyone(self) -> set[int]:
        claimed: set[int] = set()
        if self.claims.is_dir():
            for journal in self.claims.iterdir():
                if not journal.name.endswith(".json"):
                    claimed |= self._held(journal.name)[0]
        return claimed

    # --- reading --------------------------------------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        """Lines waiting, finished and failed (read without the lock: a moment's view)."""
        return {"toprocess": count_lines(self.toprocess), "finished": count_lines(self.finished),
                "failed": count_lines(self.failed)}

    def running(self) -> dict[str, set[int]]:
        """The lines each live farmer holds."""
        return {j.name: self._held(j.name)[0] for j in self.claims.iterdir()
                if not j.name.endswith(".json") and not j.name.startswith(".")} if self.claims.is_dir() else {}

    def failed_lines(self) -> list[tuple[int, str]]:
        return list(lines_of(self.failed))

    def read_exit_codes(self) -> dict[int, int]:
        codes: dict[int, int] = {}
        for task_id, code in lines_of(self.exit_codes):
            try:
                codes[task_id] = int(code)
            except ValueError:
                continue
        return codes

    def log_tail(self, task_id: int, lines: int = 5) -> str:
        try:
            with open(self.log(task_id), "rb") as f:
                f.seek(max(0, os.fstat(f.fileno()).st_size - 4096))
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return ""
        return "\n".join(text.rstrip("\n").splitlines()[-lines:])

    # --- the timeline ---------------------------------------------------------------------------------------

    def append_timeline_locked(self, events: Sequence[dict[str, Any]]) -> None:
        """Add events to the JSON list in ``timeline.json`` in place (PyTaskFarmer rewrites it per line)."""
        append_to_list(self.timeline, events)


def _kill_orphans(ids: set[int], workdir: str) -> None:
    """Kill what a dead farmer left running of the lines ``ids`` on this host: the processes of this work dir
    (marked in their environment) whose ``PROC_NUMBER`` is one of them. No live farmer runs these lines, and
    the mark does not depend on the dead farmer having noted its lines' process groups in time."""
    if not ids:
        return
    wanted = {str(i) for i in ids}
    for process in psutil.process_iter(["pid"]):
        try:
            environment = process.environ()
            if environment.get(MARK) == workdir and environment.get("PROC_NUMBER") in wanted:
                process.send_signal(signal.SIGKILL)
        except (OSError, psutil.Error):
            continue


