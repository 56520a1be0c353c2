"""The node side of a worker job (a pilot, or a bundle): claim batches of units from a :class:`WorkQueue` and run
each unit in a child process, until the work is done, the allocation ends, or nothing came for a while. The
units of a batch run one after another; the worker notes in its log of the queue when each starts and ends.

What a front-end needs loaded (e.g. the workflow script) is loaded once, before :func:`serve`; units then run
in a child process, a long-lived *runner* that runs one unit after another (or, for a command and a unit that
asks for it, a child forked for that unit alone): a unit that crashes (a segfault, ``os._exit``) takes
nothing else down, and each has its own stdout and stderr log (or its part of the worker's, whose first and last
byte its line of the queue's log names, when the unit's entry gives it no log files), result and exit code
(:mod:`b2batch.engine.pilots.unit_processes` says what is reset between the units of a runner).

A unit is one of:

- ``{"call": "module:function", "args": [...]}``: the function's return value is the exit code;
- ``{"command": [...]}``: a command line, run in place of the child.

The worker's lease on its claims (its heartbeat), its allocation's end and the steering process it may end with
are :mod:`b2batch.engine.pilots.worker_lease`'s. SIGTERM, SIGINT, SIGHUP, SIGUSR1 and SIGUSR2 stop the running
unit. At the allocation's end (the batch system's warning, SIGUSR1 or SIGUSR2, or any stop signal within
:data:`~b2batch.engine.pilots.worker_lease.END_MARGIN` seconds of the walltime) it goes back
in the queue with the rest of its batch, not counted as failed. Before it (``scancel``, ``condor_rm``, ``qdel``
from outside, a preemption without warning) it ends with the job, as it would in a job of its own: the steering
process counts it lost and submits it again within ``max_resubmissions``, so that a unit whose pilots are
cancelled again and again ends as failed rather than going round for ever; the rest of its batch goes back.
A worker whose allocation has too little left for another unit, or that was told to stop (checked between the
units of a batch every :data:`STOP_CHECK` seconds), puts the rest of its batch back too. A worker whose spec names
its steering process (a run without ``--batch``, whose local pilots stand for luigi's worker processes) ends with
it: once that process is gone, it stops its unit as SIGTERM would, writes the unit's exit code (no one is left to
count the unit lost; a rerun sees it ended and runs it again) and ends.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import select
import signal
import stat
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from b2batch.engine.processes import host_name, signal_group
from b2batch.engine.pilots.unit_processes import STOP_SIGNALS, Runner, needs_fresh_process, run_forked, run_unit
from b2batch.engine.usage import figures
from b2batch.engine.pilots.work_queue import DRAIN_GRACE, HOLD_SECONDS
from b2batch.engine.pilots.idle_wait import IdleWait
from b2batch.engine.pilots.worker_lease import LeasedWorker, WorkerConfig

logger = logging.getLogger(__name__)

__all__ = ["STOP_SIGNALS", "Worker", "WorkerConfig", "main", "run_unit", "serve"]

#: Seconds a unit has to end after SIGTERM before its process group gets SIGKILL.
KILL_GRACE = 10.0
#: Seconds the worker first waits when it found nothing to claim (doubled while it finds nothing, up to 1 s)
FIRST_PAUSE = 0.005
#: Seconds between two looks, within a batch of units, at whether the worker was told to stop.
STOP_CHECK = 0.5


@dataclass
class Holding:
    """The claimed batch a worker runs: its name, until when (monotonic) it holds the units it has not started,
    the unit that runs (since when) and those after it."""

    batch: str
    until: float
    running: tuple[str, dict[str, Any]] | None = None
    rest: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    since: float = 0.0


class Worker(LeasedWorker):
    """One worker process: its queue, its lease (:class:`LeasedWorker`) and the unit it runs."""

    def __init__(self, config: WorkerConfig) -> None:
        super().__init__(config)
        #: Whether the running unit's process was sent a signal (a runner is then replaced after the unit).
        self.signalled = False
        self.pid = os.getpid()
        self.host = host_name()
        self.runner = Runner(self.job_id)
        #: This worker's own stdout and stderr files, where units without log files of their own write.
        self.logs = own_logs()
        self.next_stop_check = 0.0  # monotonic time of the next look at whether the worker is to stop
        self.holding: Holding | None = None

    def serve(self) -> int:
        for signum in STOP_SIGNALS:
            signal.signal(signum, self._on_signal)
        wake = IdleWait()
        self.queue.join(self.name)
        self.heartbeat(force=True)
        logger.info("Worker %s (job %s) serves %s", self.name, self.job_id, self.queue.root)
        idle_since = time.monotonic()
        pause = FIRST_PAUSE
        try:
            while self.stop_signal is None:
                if not self.heartbeat():
                    return 0
                if self.steering_gone():
                    break
                if self.out_of_time():
                    break
                claimed = self.queue.claim(self.name)
                if claimed is None:
                    idle = time.monotonic() - idle_since
                    if (self.queue.stopping(self.name) or idle >= self.config.idle_timeout
                            or (idle >= DRAIN_GRACE and self.queue.is_drained())):
                        break
                    wake.wait(max(0.0, min(pause, self.config.idle_timeout - idle)))
                    pause = min(pause * 2, self.config.idle_pause, self.beat_interval)
                    continue
                pause = FIRST_PAUSE
                going = self.run_batch(*claimed)
                if going == "stop":
                    if self.stop_signal is None:
                        return 0  # the lease was lost: what it holds is left to the steering process
                    break
                if going == "end":
                    break
                idle_since = time.monotonic()
        finally:
            self.close()
            self.queue.close_log()
            wake.close()
            for signum in STOP_SIGNALS:
                signal.signal(signum, signal.SIG_DFL)
        # Its heartbeat goes (a later run must not take it for a live worker and wait on what it held); a unit a
        # signal interrupted stays in its claim, for the steering process to count lost.
        self.queue.forget_worker(self.name)
        logger.info("Worker %s ends after %d unit(s)", self.name, self.ran)
        # stopped by a signal: the exit code a shell gives a job it stops (its wrapper's, and a forked job's own);
        # a worker that ended because its steering process is gone ends well, as before (a rerun judges its units)
        if self.stop_signal is None or self.steering_gone_at is not None:
            return 0
        return 128 + self.stop_signal

    def run_batch(self, batch: str, units: list[tuple[str, dict[str, Any]]]) -> str:
        """Run the units of a claimed batch one after another: "go" on, "end" the worker (its allocation ends;
        the rest of the batch was put back) or "stop" at once (a signal, or the lease was lost). Units not
        started are held for :data:`HOLD_SECONDS` at a time: then half of them go back for any worker to take
        (all of them while a unit runs long: :meth:`_hand_back`)."""
        holding = self.holding = Holding(batch, time.monotonic() + HOLD_SECONDS)
        waiting = list(units)  # the units of the claim not run yet, in order
        first = True
        while waiting:
            if not first and (self.stop_signal is not None or self.out_of_time() or self._told_to_stop()):
                self.queue.release(self.name, batch, waiting)
                return "end" if self.stop_signal is None else "stop"
            if not first and len(waiting) > 1 and time.monotonic() >= holding.until:
                mine = (len(waiting) + 1) // 2
                if self._give_back(batch, waiting[:mine], waiting[mine:]):
                    waiting = waiting[:mine]
                holding.until = time.monotonic() + HOLD_SECONDS
            first = False
            (name, entry), waiting = waiting[0], waiting[1:]
            if self.queue.is_cancelled(name):
                self.queue.skip(self.name, name)
                continue
            holding.running, holding.rest, holding.since = (name, entry), waiting, time.monotonic()
            outcome = self.run(name, entry)
            waiting, holding.running = holding.rest, None  # none left if they went back while it ran
            if outcome == "lost":  # leave the claim: the steering process decides
                return "stop"
            if outcome == "interrupted":  # it ends with this job; the rest goes back
                self.queue.keep_only(self.name, batch, (name, entry), waiting)
                return "stop"
            if outcome != "done":  # a stop signal: the unit (started or not) and the rest go back
                self.queue.release(self.name, batch, [(name, entry), *waiting],
                                   started=name if outcome == "stopped" else None)
                return "stop"
        self.queue.finish_batch(self.name, batch)
        return "go"

    def _hand_back(self) -> None:
        """While a unit runs longer than :data:`HOLD_SECONDS`, put all the units after it back into ``todo/``."""
        holding = self.holding
        if holding is None or holding.running is None or not holding.rest \
                or time.monotonic() < holding.since + HOLD_SECONDS:
            return
        if self._give_back(holding.batch, [holding.running], holding.rest):
            holding.rest = []
        else:
            holding.since = float("inf")  # not again for this unit

    def _give_back(self, batch: str, kept: list[tuple[str, dict[str, Any]]],
                   rest: list[tuple[str, dict[str, Any]]]) -> bool:
        """Hand ``rest`` back into the queue; False when the shared file system refused (the worker then runs
        them itself: a part written before the error is a claim of its own, which the steering process puts back
        once this worker is gone, without what it ran)."""
        try:
            self.queue.give_back(self.name, batch, kept, rest)
        except OSError as e:
            logger.warning("Cannot hand units of %s back to the queue (%s): running them here", batch, e)
            return False
        return True

    def _told_to_stop(self) -> bool:
        """Between the units of a batch, at most every :data:`STOP_CHECK` seconds: whether the queue or this
        worker was told to stop (no more work; the slot is wanted; the steering process is gone), so that the
        rest of the batch goes back rather than holding the worker."""
        now = time.monotonic()
        if now < self.next_stop_check:
            return False
        self.next_stop_check = now + STOP_CHECK
        return self.queue.stopping(self.name)

    def run(self, name: str, entry: dict[str, Any]) -> str:
        """Run one claimed unit in a child: "done", "lost" (the lease), "back" (a stop signal came before it
        started), "stopped" (the allocation's end stopped it) or "interrupted" (a stop signal before the end
        stopped it)."""
        self.current = name
        self.heartbeat()  # a unit that runs longer gets a heartbeat naming it from _wait
        begin = time.monotonic()
        started = time.time()
        files, unit = entry["files"], entry["unit"]
        _preload(name, unit)
        sys.stdout.flush()
        sys.stderr.flush()
        # A stop signal from here on reaches the child: blocked until self.child is set (and in the child until
        # its own handlers are in place); one that came since the claim puts the unit back at once.
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        if self.stop_signal is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
            self.current = None
            return "back"
        self.queue.started(self.name, name, started)
        runner = None if needs_fresh_process(unit) else self.runner
        before = None if "stdout" in files or len(self.logs) < 2 else _sizes()
        if runner is None:
            pid = os.fork()
            if pid == 0:  # the child: never returns
                run_forked(entry, self.job_id, self.pid, blocked)
        else:
            pid = self._hand_over(runner, entry, blocked)
        self.child = pid
        self.signalled = False
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        outcome = self._wait(pid, name, runner)
        self.child = None
        self.current = None
        self.longest = max(self.longest, time.monotonic() - begin)
        if outcome is None:  # the lease was lost: leave the claim, the steering process decides
            return "lost"
        code, cpu, max_rss = outcome
        if runner is not None and runner.pid is not None and (self.signalled or self.stop_signal is not None):
            runner.close()  # it was sent a signal: a fresh runner for the next unit
        if code < 0 and self.stop_signal is None and -code in STOP_SIGNALS:
            time.sleep(0.2)  # a signal to the whole job reached the child first: let ours arrive
        if self.stop_signal is not None and self.steering_gone_at is None:
            if self.at_the_end():
                logger.info("Signal %d: putting %s back in the queue", self.stop_signal, name)
                return "stopped"
            logger.warning("Signal %d before the allocation's end (cancelled from outside?): %s ends with this "
                           "job, which the steering process counts as lost", self.stop_signal, name)
            return "interrupted"
        # (a unit stopped because the steering process is gone ends with its exit code: no one is left to count
        # it lost, and a rerun sees it ended, its outputs not counted, and runs it again)
        code = 128 - code if code < 0 else code
        # The unit's own figures (its process and all it waited for) go into its line of the log, after its exit
        # code's file: every unit has numbers even where the batch system's accounting is off (engine.usage).
        # A result the unit handed over (unit_processes.hand_result) goes into the line too, instead of a file.
        if "exit_code" in files:  # a unit without a job folder has its exit code in the line alone
            _write(files["exit_code"], f"{code}\n")
        parts = {}
        if before is not None:  # a unit that wrote into this worker's logs: which part of them is its own
            sys.stdout.flush()
            sys.stderr.flush()
            after = _sizes()
            parts = {"logs": {name: [self.logs[name], before[name], after[name]] for name in ("stdout", "stderr")}}
        self.queue.finish(self.name, name, {"job_id": self.job_id, "worker": self.name, "started": started,
                                            "ended": time.time(), "exit_code": code,
                                            "usage": figures(time.monotonic() - begin, cpu, max_rss, self.host),
                                            **(runner.handed if runner is not None else {}), **parts})
        self.ran += 1
        return "done"

    def _hand_over(self, runner: Runner, entry: dict[str, Any], blocked: set[int]) -> int:
        """Send the unit to the runner (started first if there is none, or it ended); the runner's pid."""
        for attempt in range(3):
            if not runner.alive():
                runner.start(self.pid, blocked)
            try:
                runner.send(entry)
                assert runner.pid is not None
                return runner.pid
            except OSError:  # it ended just now (e.g. a signal to the whole job): a fresh one
                runner.close(grace=0.5)
                if attempt == 2:
                    raise
        raise AssertionError("not reached")

    def _wait(self, pid: int, name: str, runner: Runner | None) -> tuple[int, float, int] | None:
        """Wait for the unit's end, keeping the lease and watching for a cancellation: its exit code (negative:
        the signal that killed its process), CPU seconds and peak RSS (KiB); None when the lease was lost (the
        unit's process was stopped)."""
        if runner is not None:
            waitables = runner.waitables()
            handle = None
        else:
            try:
                handle = os.pidfd_open(pid)
            except (AttributeError, OSError):
                handle = None
            waitables = [handle] if handle is not None else []
        try:
            while True:
                ready: list[Any] = []
                timeout = self.wait_interval
                if self.holding is not None and self.holding.rest:
                    timeout = max(0.01, min(timeout, self.holding.since + HOLD_SECONDS - time.monotonic()))
                if waitables:
                    try:
                        ready = select.select(waitables, [], [], timeout)[0]
                    except InterruptedError:
                        pass
                else:
                    time.sleep(0.02)
                ended = _ended(runner, pid, ready) if runner is not None else _reaped(pid)
                if ended is not None:
                    return ended
                if not self.heartbeat():
                    _stop(pid)
                    if runner is not None:
                        runner.forget()
                    return None
                self.steering_gone()
                if self.steering_gone_at is not None and time.monotonic() - self.steering_gone_at > KILL_GRACE:
                    signal_group(pid, signal.SIGKILL)  # no steering process is left to escalate
                self._hand_back()
                if not self.signalled and self.queue.is_cancelled(name):
                    logger.info("%s was cancelled by the steering process", name)
                    self.signalled = True
                    signal_group(pid, signal.SIGTERM)
        finally:
            if handle is not None:
                os.close(handle)

    def close(self) -> None:
        """End the runner, if any."""
        self.runner.close()


def _preload(name: str, unit: dict[str, Any]) -> None:
    """Import what the unit needs once in the worker, so that each child (a runner too) finds it loaded (a
    trivial call: 85 -> 28 ms CPU when each unit had a child of its own); an error is the unit's, in its
    stderr log, when its child imports it again."""
    for module in unit.get("preload", []):
        if module in sys.modules:
            continue
        try:
            importlib.import_module(module)
        except Exception:
            logger.exception("Cannot preload %s for %s (the unit fails)", module, name)
            return
    call = unit.get("call")
    if call:
        module = call.partition(":")[0]
        if module not in sys.modules:
            try:
                importlib.import_module(module)
            except Exception:  # noqa: BLE001 - the child imports it again, its error into the unit's stderr log
                logger.debug("Cannot import %s in the worker (the unit's child tries again)", call)


def _ended(runner: Runner, pid: int, ready: list[Any]) -> tuple[int, float, int] | None:
    """The outcome of the runner's unit, once it answered or ended."""
    replies = runner.waitables()[0]
    if replies not in ready and ready:  # the runner ended: an answer it wrote just before is read first
        ready = select.select([replies], [], [], 0)[0] or ready
    if replies in ready:
        reply = runner.reply()
        if reply is not None:
            if reply["retire"]:
                runner.close()
            return reply["code"], reply["cpu"], reply["max_rss"]
    elif not ready:
        return None
    status, usage = runner.reap()  # it ended with the unit (a segfault, os._exit, a signal)
    cpu = max(0.0, usage.ru_utime + usage.ru_stime - runner.reported_cpu)
    return os.waitstatus_to_exitcode(status), cpu, usage.ru_maxrss


def _reaped(pid: int) -> tuple[int, float, int] | None:
    done, status, usage = os.wait4(pid, os.WNOHANG)
    if not done:
        return None
    return os.waitstatus_to_exitcode(status), usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def own_logs() -> dict[str, str]:
    """The files this process's stdout and stderr (file descriptors 1 and 2) write to, by name; without the ones
    that are no regular file (a terminal, a pipe)."""
    found = {}
    for name, fd in (("stdout", 1), ("stderr", 2)):
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                found[name] = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            pass
    return found


def _sizes() -> dict[str, int]:
    """The sizes of this process's stdout and stderr files now."""
    return {"stdout": os.fstat(1).st_size, "stderr": os.fstat(2).st_size}


def _write(path: str, text: str) -> None:
    """Write a small file so that a reader sees the old file or the whole new one (plain system calls: once
    per unit)."""
    temporary = f"{os.path.dirname(path)}/.{os.path.basename(path)}.{os.getpid()}.tmp"
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(descriptor, text.encode())
        os.fchmod(descriptor, 0o644)
    finally:
        os.close(descriptor)
    os.replace(temporary, path)


def _stop(pid: int) -> None:
    """SIGTERM to the unit's process group, SIGKILL after the grace time; reap it."""
    signal_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + KILL_GRACE
    while time.monotonic() < deadline:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            return
        time.sleep(0.05)
    signal_group(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


def serve(spec: dict[str, Any]) -> int:
    """Run a worker job described by ``spec["worker"]`` (what the front-end loads comes first)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return Worker(WorkerConfig.of(spec["worker"])).serve()


def main(argv: list[str]) -> int:
    """A worker job whose units need nothing loaded first, or a job of one such unit (a spec with ``"unit"``
    instead of ``"worker"``): ``python -m b2batch.engine.pilots.node_worker <spec.json>``."""
    spec = json.loads(Path(argv[0]).read_text())
    if "worker" not in spec:
        return run_unit(spec["unit"])
    return serve(spec)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
