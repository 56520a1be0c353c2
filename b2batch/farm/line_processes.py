"""The processes of a farmer's lines: each line started in a process group of its own (spawned, or forked for a
PyTaskFarmer-style runner whose ``run`` is Python), reaped as it ends, and at a stop killed (SIGTERM to its group,
SIGKILL after ``kill_grace``) to go back into ``toprocess``. What a line that ended becomes (recorded, shown in
the timeline) is :class:`~b2batch.farm.farmer.Farmer`'s, which builds on :class:`LineProcesses`.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from b2batch.engine.processes import signal_group
from b2batch.farm.display import shown, where
from b2batch.farm.runners import Runner
from b2batch.farm.stopping import STOP_SIGNAL_WITHIN, STOPPED_LINE, cannot_start_reason
from b2batch.farm.workdir import MARK, WorkDir

logger = logging.getLogger(__name__)

#: Signals a line starts with at their default action (Python ignores SIGPIPE and SIGXFSZ).
DEFAULT_IN_CHILD = frozenset({signal.SIGPIPE, signal.SIGXFSZ})


@dataclass
class _Running:
    task_id: int
    pid: int
    slot: int
    started: float
    cleanup: Any = None



class LineProcesses:
    """The running lines of one farmer: started into free slots, reaped, stopped."""

    def __init__(self, workdir: WorkDir, handler: Any, runner: Any, options: Any) -> None:
        self.workdir = workdir
        self.handler = handler
        self.runner = runner
        self.forking = not isinstance(runner, Runner)  # a PyTaskFarmer-style runner: run() in a forked child
        self.options = options
        self.running: dict[int, _Running] = {}
        self.free_slots = list(range(options.proc, 0, -1))
        self.pids: list[str] = []
        self.log_prefix = str(workdir.logs) + "/log_"
        self.base_env = {**os.environ, MARK: str(workdir.path)}
        self._old_mask: set[int] = set()
        #: Lines killed by SIGTERM, SIGINT or SIGHUP, held for a moment: if the farmer's own stop signal follows
        #: (a batch system's cancel or Ctrl-C signals every process), they were stopped and go back into
        #: toprocess; else they failed. (line, exit code, when it ended, until when it is held (monotonic))
        self.suspects: list[tuple[_Running, int, float, float]] = []

    def say(self, *words: Any) -> None:
        raise NotImplementedError

    def _ended(self, task_id: int, code: int, started: float, ended: float, slot: int) -> None:
        """A line ended with ``code``: the farmer records it."""
        raise NotImplementedError

    def _start(self, task_id: int) -> None:
        command = self.handler[task_id]
        slot = self.free_slots.pop()
        started = time.time()
        if self.options.verbose:
            self.say("Executing task", task_id, ":", shown(command, 2000))
        log = self.log_prefix + str(task_id)
        cleanup = None
        try:
            if self.forking:
                pid = self._fork(task_id, command, log)
            else:
                launch = self.runner.launch(task_id, command)
                cleanup = launch.cleanup
                env = {**self.base_env, "PROC_NUMBER": str(task_id), **(launch.env or {})}
                actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                           (os.POSIX_SPAWN_OPEN, 1, log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644),
                           (os.POSIX_SPAWN_DUP2, 1, 2)]
                pid = os.posix_spawnp(launch.executable or launch.argv[0], launch.argv, env, file_actions=actions,
                                      setpgroup=0, setsigmask=(), setsigdef=DEFAULT_IN_CHILD)
        except Exception as e:  # noqa: BLE001  (a line that cannot start fails alone, whatever the reason)
            self.free_slots.append(slot)
            if cleanup:
                cleanup()
            self._not_started(task_id, command, e, log, started, slot)
            return
        self.running[pid] = _Running(task_id, pid, slot, started, cleanup)
        self.pids.append(f"p {task_id} {pid}\n")

    def where(self, task_id: int) -> str:
        return where(self.handler, task_id)

    def _not_started(self, task_id: int, command: str, error: Exception, log: str, started: float,
                     slot: int) -> None:
        """A line that cannot be started (not found, not executable, a NUL byte, too long for the OS...) fails
        alone: into ``failed``, the reason in its log, exit code 127 (not found) or 126 (cannot run)."""
        code = 127 if isinstance(error, FileNotFoundError) else 126
        reason = cannot_start_reason(error)
        message = f"b2batch farm: {self.where(task_id)} cannot be started: {reason}. The line: {shown(command)}"
        try:
            with open(log, "w", encoding="utf-8", errors="backslashreplace") as f:
                f.write(message + "\n")
        except OSError as e:
            logger.warning("Cannot write %s: %s", log, e)
        self.say(f"{message} (it goes into failed with exit code {code})")
        self._ended(task_id, code, started, started, slot)

    def _fork(self, task_id: int, command: str, log: str) -> int:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid:
            try:
                os.setpgid(pid, pid)
            except OSError:
                pass
            return pid
        code = 1
        try:
            os.setpgid(0, 0)
            for signum in DEFAULT_IN_CHILD:
                signal.signal(signum, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_SETMASK, self._old_mask)
            os.environ.update({MARK: str(self.workdir.path), "PROC_NUMBER": str(task_id)})
            fd = os.open(os.devnull, os.O_RDONLY)
            os.dup2(fd, 0)
            with open(log, "w") as logfh:
                os.dup2(logfh.fileno(), 1)
                os.dup2(logfh.fileno(), 2)
                code = int(self.runner.run(task_id, command, logfh) or 0)
        except BaseException:  # noqa: BLE001  (the forked child must end here, whatever happened)
            traceback.print_exc()
        finally:
            os._exit(code & 0xFF if code >= 0 else 128 + (-code & 0x7F))

    def _waited(self) -> Iterator[tuple[_Running, int]]:
        """The running lines that ended (reaped, forgotten, their clean-up done), each with its wait status."""
        while self.running:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            run = self.running.pop(pid, None)
            if run is not None:
                if run.cleanup:
                    run.cleanup()
                yield run, status

    def _reap(self) -> list[tuple[_Running, int]]:
        ended = []
        for run, status in self._waited():
            code = os.waitstatus_to_exitcode(status)
            code = 128 - code if code < 0 else code
            if code - 128 in STOPPED_LINE:  # the farmer's own stop signal may be on its way: hold the line,
                # and its slot, so that no next line starts in the instant before the stop
                self.suspects.append((run, code, time.time(), time.monotonic() + STOP_SIGNAL_WITHIN))
                continue
            self.free_slots.append(run.slot)
            ended.append((run, code))
            self._ended(run.task_id, code, run.started, time.time(), run.slot)
        return ended

    def _settle_suspects(self, now: float) -> None:
        """Lines held after a SIGTERM, SIGINT or SIGHUP with no stop of the farmer following: they failed."""
        if self.suspects and self.suspects[0][3] <= now:
            due = [s for s in self.suspects if s[3] <= now]
            self.suspects = [s for s in self.suspects if s[3] > now]
            for run, code, ended, _ in due:
                self.free_slots.append(run.slot)
                self._ended(run.task_id, code, run.started, ended, run.slot)

    # --- stopping -------------------------------------------------------------------------------------------

    def _stop_all(self) -> list[int]:
        """Kill the running lines: their ids (lines that ended 0 meanwhile are recorded instead)."""
        self._reap()
        killed = {run.pid: run for run in self.running.values()}
        for run in killed.values():
            signal_group(run.pid, signal.SIGTERM)
        deadline = time.monotonic() + self.options.kill_grace
        put_back: list[int] = []
        while self.running and time.monotonic() < deadline:
            signal.sigtimedwait({signal.SIGCHLD}, max(0.0, min(0.2, deadline - time.monotonic())))
            put_back += self._take_killed(self._reap_quietly())
        for run in list(self.running.values()):
            signal_group(run.pid, signal.SIGKILL)
        while self.running:
            signal.sigtimedwait({signal.SIGCHLD}, 0.2)
            put_back += self._take_killed(self._reap_quietly())
        return put_back

    def _reap_quietly(self) -> list[tuple[_Running, int]]:
        ended = []
        for run, status in self._waited():
            self.free_slots.append(run.slot)
            ended.append((run, os.waitstatus_to_exitcode(status)))
        return ended

    def _take_killed(self, ended: list[tuple[_Running, int]]) -> list[int]:
        back = []
        for run, code in ended:
            if code == 0:  # it finished before the signal reached it
                self._ended(run.task_id, 0, run.started, time.time(), run.slot)
            else:
                back.append(run.task_id)
        return back

    def _kill_all(self) -> None:
        for run in self.running.values():
            signal_group(run.pid, signal.SIGKILL)
