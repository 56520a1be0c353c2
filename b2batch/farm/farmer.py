"""The farmer: ``proc`` lines at a time from a work dir, each in a process group of its own, until no line is
left, the allocation ends, or a signal or the timeout stops it.

One process runs the farm. It blocks the signals it acts on and waits for them with ``sigtimedwait``: a
child that ends (SIGCHLD), SIGUSR1, SIGTERM, SIGINT, SIGHUP, or SIGALRM (``--timeout``). After each wait it
records the lines that ended and takes lines for its free slots, under one hold of the work dir's lock.
A stop signal kills the running lines (SIGTERM to their process groups, SIGKILL after a grace time) and puts
them back at the end of ``toprocess``; the farmer then exits 1. A normal end exits 0, failed lines or not.

Inside a batch job the farmer takes no new line once the time left in the allocation
(:func:`b2batch.engine.pilots.worker_lease.allocation_end`) is shorter than the longest line so far (or
``task_seconds``) plus a margin. With ``requeue``, a farmer in a Slurm job that stopped with lines left asks
Slurm to requeue its job (``scontrol requeue``). Starting, reaping and killing the lines' processes is
:class:`~b2batch.farm.line_processes.LineProcesses`'s, on which :class:`Farmer` builds.
"""

from __future__ import annotations

import collections
import logging
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

import psutil

from b2batch.farm.display import shown
from b2batch.farm.line_processes import LineProcesses
from b2batch.farm.stopping import STOP_SIGNALS, exit_code_of
from b2batch.farm.workdir import HOST, WorkDir

logger = logging.getLogger(__name__)

WAITED = STOP_SIGNALS | {signal.SIGCHLD}
#: Seconds between two timeline writes.
TIMELINE_EVERY = 2.0
#: Lines shorter than this on average are taken several at a time.
PREFETCH_BELOW = 0.5
#: Seconds the result of a line may wait to be recorded while lines are taken several at a time.
RECORD_WITHIN = 0.05
#: Seconds of margin before the end of the allocation when no line is taken any more.
WALLTIME_MARGIN = 5.0
#: Seconds beyond ``signal_seconds`` before the allocation's end within which a SIGTERM counts as Slurm's warning.
REQUEUE_SLACK = 60.0


@dataclass
class _Loop:
    """The farmer loop's clocks (monotonic seconds) and state."""

    end: float | None  # the allocation's end (epoch seconds), None outside a batch job without walltime
    beat_every: float
    next_beat: float
    next_timeline: float
    next_recover: float = 0.0
    recovered_at: float = -1.0
    draining: bool = False  # too little time left in the allocation: no more lines
    grown: bool = False  # lines were added to the list after this farmer read it: no more lines
    stop: int | None = None  # the stop signal that came


@dataclass
class FarmerOptions:
    proc: int = 8
    #: Seconds the whole run may take (SIGALRM), or None.
    timeout: int | None = None
    verbose: bool = False
    #: Seconds the allocation lasts from the start (None: ask the scheduler if ``in_batch_job``, else unlimited).
    walltime: float | None = None
    in_batch_job: bool = False
    #: Seconds a line needs at most (None: the longest so far).
    task_seconds: float | None = None
    kill_grace: float = 5.0
    requeue: bool = False
    heartbeat_timeout: float = 60.0
    #: The steering process whose pilot this farmer is (its tag, noted in the heartbeat file), or "".
    steering: str = ""
    #: Seconds before the allocation's end at which Slurm warns the pilot (--signal=B:USR1@N).
    signal_seconds: float = 120.0


@dataclass
class FarmResult:
    exit_code: int
    finished: int = 0
    failed: int = 0
    put_back: list[int] = field(default_factory=list)
    stopped_by: str = ""


class Farmer(LineProcesses):
    """One farmer process on one work dir (its lines' processes: :class:`LineProcesses`)."""

    def __init__(self, workdir: WorkDir, handler: Any, runner: Any, options: FarmerOptions,
                 out: TextIO | None = None) -> None:
        super().__init__(workdir, handler, runner, options)
        self.tasks: Sequence[str] = handler.tasks
        self.out = out or sys.stdout
        self.name = f"{HOST}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.events: list[dict[str, Any]] = []
        self.results: list[tuple[int, int]] = []
        #: Lines taken and not started yet (more than the free slots when lines are short).
        self.queue: collections.deque[int] = collections.deque()
        #: When results not yet recorded must be written at the latest (monotonic).
        self.record_by = 0.0
        self.durations = 0.0
        self.finished = self.failed = 0
        self.longest = 0.0

    def say(self, *words: Any) -> None:
        print(time.asctime(), *words, file=self.out, flush=True)

    # --- the loop -------------------------------------------------------------------------------------------

    def run(self) -> FarmResult:
        self._old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, WAITED)
        try:
            return self._serve()
        finally:
            signal.alarm(0)
            while signal.sigpending() & WAITED:  # a second stop signal must not kill us after the clean-up
                signal.sigtimedwait(WAITED, 0)
            signal.pthread_sigmask(signal.SIG_SETMASK, self._old_mask)

    def _serve(self) -> FarmResult:
        loop = self._start_serving()
        try:
            while self._turn(loop):
                pass
            put_back, left = self._stop_serving(loop)
        except BaseException:
            self._kill_all()
            raise
        return self._result(loop, put_back, left)

    def _start_serving(self) -> _Loop:
        """Register the farmer in the work dir, arm the timeout; the loop's clocks."""
        options = self.options
        started = time.time()
        end = None
        if options.walltime or options.in_batch_job:
            from b2batch.engine.pilots.worker_lease import allocation_end

            end = allocation_end(options.walltime, started)
        self.workdir.register(self.name, {"host": HOST, "pid": os.getpid(), "started": started,
                                          "create_time": psutil.Process().create_time(),
                                          "job_id": os.environ.get("SLURM_JOB_ID") or os.environ.get("JOB_ID"),
                                          "steering": options.steering})
        if options.timeout:
            signal.alarm(int(options.timeout))
        beat_every = max(0.5, options.heartbeat_timeout / 6)
        now = time.monotonic()
        return _Loop(end=end, beat_every=beat_every, next_beat=now + beat_every, next_timeline=now + TIMELINE_EVERY)

    def _turn(self, loop: _Loop) -> bool:
        """One turn of the loop: record ended lines, take and start lines, beat, wait for a signal; False when
        the farmer is done (no line left to run) or a stop signal came (``loop.stop``)."""
        self._reap()
        now = time.monotonic()
        self._settle_suspects(now)
        self._watch_walltime(loop)
        want = 0 if (loop.draining or loop.grown) else len(self.free_slots) + self._prefetch() - len(self.queue)
        if loop.draining and self.queue:
            self.put_back_queue()
        if (len(self.queue) < len(self.free_slots) and want > 0) or self.results and (
                not self.queue or now >= self.record_by) or (self.events and now >= loop.next_timeline):
            self.queue.extend(self._record_and_claim(loop, now, want))
        while self.queue and self.free_slots:
            self._start(self.queue.popleft())
        if self.pids:
            self.workdir.journal(self.name, "".join(self.pids))
            self.pids = []
        if not self.running and not self.queue and not self.suspects:
            if self.results:
                return True  # a line that could not start: record it first
            if want > 0 and loop.recovered_at != now:
                loop.next_recover = 0.0  # look for dead farmers' lines once more before ending
                return True
            return False
        if now >= loop.next_beat:
            try:
                self.workdir.beat(self.name)
            except OSError as e:
                logger.warning("Cannot touch the heartbeat of %s: %s", self.name, e)
            loop.next_beat = now + loop.beat_every
        return self._wait(loop)

    def _watch_walltime(self, loop: _Loop) -> None:
        """Take no more lines once the allocation's time left is shorter than a line needs."""
        if loop.end is None or loop.draining:
            return
        needed = self.options.task_seconds or self.longest
        if loop.end - time.time() < needed * 1.1 + WALLTIME_MARGIN:
            loop.draining = True
            self.say(f"{loop.end - time.time():.0f} s left in the allocation, a line needs up to "
                     f"{needed:.0f} s: taking no more lines")

    def _record_and_claim(self, loop: _Loop, now: float, want: int) -> list[int]:
        """Under one hold of the lock: record the lines that ended, claim up to ``want`` lines (those of dead
        farmers too, now and then), write the timeline when due."""
        workdir = self.workdir
        with workdir.locked():
            self._record_locked()
            claimed = workdir.claim_locked(self.name, max(0, want))
            if len(claimed) < want and now >= loop.next_recover:
                loop.next_recover = now + loop.beat_every
                loop.recovered_at = now
                if workdir.recover_locked(self.name, self.tasks):
                    claimed += workdir.claim_locked(self.name, want - len(claimed))
            beyond = [i for i in claimed if i >= len(self.tasks)]
            if beyond:  # another farmer took up lines added to the list after this one read it
                workdir.release_locked(self.name, beyond, self.tasks)
                claimed = [i for i in claimed if i < len(self.tasks)]
                loop.grown = True
            if self.events and (now >= loop.next_timeline or not self.running and not claimed):
                workdir.append_timeline_locked(self.events)
                self.events = []
                loop.next_timeline = now + TIMELINE_EVERY
        return claimed

    def _wait(self, loop: _Loop) -> bool:
        """Wait for a child's end, a stop signal or the next due time; False after a stop signal."""
        # (the timeline's time only while events wait for it: a time past with nothing to write would make the
        # wait return at once, turn after turn, and the farmer spin while its lines run)
        wake = min(loop.next_beat, loop.next_timeline if self.events else loop.next_beat,
                   self.record_by if self.results else loop.next_beat, *(held for *_, held in self.suspects))
        busy = self.running or self.suspects
        info = signal.sigtimedwait(WAITED, max(0.0, wake - time.monotonic()) if busy else 0)
        if info is not None and info.si_signo in STOP_SIGNALS:
            loop.stop = info.si_signo
            return False
        return True

    def _stop_serving(self, loop: _Loop) -> tuple[list[int], int]:
        """Stop the running lines after a stop signal, put back what was not done, record the rest, leave the
        work dir; the lines put back and the lines left to process."""
        workdir = self.workdir
        put_back = self._stop_all() if loop.stop is not None else []
        put_back += [run.task_id for run, *_ in self.suspects] + list(self.queue)
        self.suspects = []
        self.queue.clear()
        with workdir.locked():
            self._record_locked()
            workdir.append_timeline_locked(self.events)
            self.events = []
            if put_back:
                workdir.release_locked(self.name, put_back, self.tasks)
            left = workdir.counts()["toprocess"]
        workdir.unregister(self.name)
        workdir.close()
        return put_back, left

    def _result(self, loop: _Loop, put_back: list[int], left: int) -> FarmResult:
        """The farm's result and its last words; a requeue of the Slurm job when it stopped with lines left."""
        stop = loop.stop
        result = FarmResult(exit_code_of(stop), self.finished, self.failed, put_back)
        if stop is not None:
            result.stopped_by = "the timeout" if stop == signal.SIGALRM else signal.Signals(stop).name
            self.say(f"Stopped by {result.stopped_by}: {len(put_back)} running line(s) put back into toprocess")
        # Slurm's warning before the time limit reaches the farmer as USR1, or as TERM forwarded by the job's
        # wrapper; a TERM long before the end is a cancel (scancel), after which a requeue would keep the job.
        end = loop.end
        warned = stop == signal.SIGUSR1 or (stop == signal.SIGTERM and end is not None
                                              and end - time.time() < self.options.signal_seconds + REQUEUE_SLACK)
        if self.options.requeue and (warned or loop.draining) and left:
            self._requeue()
        self.say(f"Finished working: {self.finished} finished, {self.failed} failed in this run, {left} left to "
                 f"process")
        return result

    # --- lines ----------------------------------------------------------------------------------------------

    def _prefetch(self) -> int:
        """Lines to take beyond the free slots: none while lines last long, so that other farmers get them;
        a few when they are short, so that the lock is taken once for several lines."""
        done = self.finished + self.failed
        if done < 2 * self.options.proc or self.durations / done > PREFETCH_BELOW:
            return 0
        return min(4 * self.options.proc, 64)

    def put_back_queue(self) -> None:
        with self.workdir.locked():
            self.workdir.release_locked(self.name, list(self.queue), self.tasks)
        self.queue.clear()

    def _ended(self, task_id: int, code: int, started: float, ended: float, slot: int) -> None:
        if not self.results:
            self.record_by = time.monotonic() + RECORD_WITHIN
        self.results.append((task_id, code))
        self.longest = max(self.longest, ended - started)
        self.durations += ended - started
        if code == 0:
            self.finished += 1
        else:
            self.failed += 1
        if self.options.verbose:
            self.say("Completed task", task_id, ":", shown(self.tasks[task_id], 2000), f"(exit code {code})")
        self.events.append({"cat": "task", "name": self.tasks[task_id], "pid": os.getpid(), "tid": slot,
                            "ts": started * 1e6, "dur": (ended - started) * 1e6, "ph": "X",
                            "args": {"id": task_id, "exit_code": code, "host": HOST}})

    def _record_locked(self) -> None:
        if self.results:
            self.workdir.finish_locked(self.name, self.results, self.tasks)
            self.results = []

    def _requeue(self) -> None:
        job = os.environ.get("SLURM_JOB_ID")
        if not job:
            return
        job = os.environ.get("SLURM_ARRAY_JOB_ID", job) + (
            f"_{os.environ['SLURM_ARRAY_TASK_ID']}" if os.environ.get("SLURM_ARRAY_TASK_ID") else "")
        self.say(f"Lines are left: asking Slurm to requeue job {job}")
        try:
            done = subprocess.run(["scontrol", "requeue", job], capture_output=True, text=True, timeout=60,
                                  check=False)
            if done.returncode:
                self.say(f"scontrol requeue {job} failed: {done.stderr.strip()}")
        except (OSError, subprocess.SubprocessError) as e:
            self.say(f"scontrol requeue {job} failed: {e}")
