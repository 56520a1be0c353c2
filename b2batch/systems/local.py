"""The ``local`` batch system: jobs are background processes of this machine, a limited number at once.

It runs the same wrapper as every other batch system, so the whole batch path runs and is tested anywhere.
"""

from __future__ import annotations

import collections
import errno
import logging
import os
import signal
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from b2batch.engine import BatchSystem, Job, JobState, JobStatus
from b2batch.engine.files import atomic_write
from b2batch.engine.outcome import written_exit_code
from b2batch.engine.processes import host_name, noted_process, signal_group
from b2batch.engine.usage import measured, usage_file
from b2batch.systems.job_settings import WRAPPER_SETTINGS
from b2batch.systems.local_forks import ForkedProcess, Zygote, wanted

if TYPE_CHECKING:
    import subprocess

    import psutil  # (imported where used: a run of new jobs needs none of it)

logger = logging.getLogger(__name__)


#: Seconds a killed job has to end after SIGTERM (its task unwinds, removing temporary outputs) before its
#: process group gets SIGKILL.
KILL_GRACE = 10.0
#: Seconds a closing run waits for its local jobs that are ending (see :meth:`LocalSystem.close`).
CLOSE_GRACE = 5.0
#: How often a wrapper's start is tried when its file is busy (see :func:`_start`).
ETXTBSY_TRIES = 20


def _start(wrapper: Path) -> subprocess.Popen[bytes]:
    """Start a job's wrapper in a session of its own.

    Exec of a script fails with ETXTBSY ("Text file busy") while any process holds it open for writing: a child
    that another thread of this process forked in the instant this wrapper's file was still open (until that
    child's own exec closes it). That lasts at most a few milliseconds, so the start is tried again after a short
    pause."""
    import subprocess  # (only here: the jobs a zygote forks need none)

    for attempt in range(ETXTBSY_TRIES):
        try:
            return subprocess.Popen([str(wrapper)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, start_new_session=True)
        except OSError as e:
            if e.errno != errno.ETXTBSY or attempt == ETXTBSY_TRIES - 1:
                raise
            time.sleep(0.01 * (attempt + 1))
    raise AssertionError("not reached")


class _Pool:
    """Starts waiting jobs when a slot is free; one per run.

    The run asks about its jobs in every turn of its loop: the pool checks its running processes at most
    every ``UPDATE_INTERVAL`` seconds, and says which jobs started or ended since it was last asked.
    """

    UPDATE_INTERVAL = 0.2

    def __init__(self, slots: int, zygote: Zygote | None = None) -> None:
        #: Jobs run at once: the run's local_slots.
        self._slots = slots
        #: Where jobs that need no wrapper are forked from (None: every job starts from its wrapper).
        self.zygote = zygote
        self.waiting: collections.OrderedDict[str, Job] = collections.OrderedDict()
        self.running: dict[str, subprocess.Popen[bytes] | ForkedProcess] = {}
        self.ended: dict[str, int] = {}
        self.lock = threading.Lock()
        self.counter = 0
        self._updated_at = 0.0
        #: Jobs of an earlier steering process followed by this one: their wrapper process and exit-code file.
        self.adopted: dict[str, tuple[psutil.Process, Path]] = {}
        self._wrappers: dict[str, psutil.Process] | None = None
        self._wrappers_at = 0.0
        #: Job ids whose state changed since :meth:`take_changed`.
        self.changed: set[str] = set()
        #: Each running job and when it started, for its usage figures.
        self.started: dict[str, tuple[Job, float]] = {}
        #: Processes whose end :meth:`any_ended` reported (each once), until they are reaped.
        self._told: set[int] = set()

    def slots(self) -> int:
        return self._slots

    def submit(self, job: Job) -> str:
        with self.lock:
            self.counter += 1
            job_id = f"{os.getpid()}.{self.counter}"
            self.waiting[job_id] = job
            self.changed.add(job_id)
            self._updated_at = 0.0
        return job_id

    def take_changed(self) -> set[str]:
        with self.lock:
            changed, self.changed = self.changed, set()
        return changed

    def update(self, force: bool = False) -> None:
        with self.lock:
            now = time.monotonic()
            if not force and now - self._updated_at < self.UPDATE_INTERVAL:
                return
            self._updated_at = now
            for job_id, popen in list(self.running.items()):
                code = self._reap(job_id, popen)
                if code is not None:
                    self.ended[job_id] = code
                    del self.running[job_id]
                    self._told.discard(popen.pid)
                    self.changed.add(job_id)
            for job_id, (process, exit_code_file) in list(self.adopted.items()):
                if not _running(process):
                    self.ended[job_id] = _read_code(exit_code_file)
                    del self.adopted[job_id]
                    self.changed.add(job_id)
            if not self.waiting:
                return
            slots = self.slots()
            while self.waiting and len(self.running) + len(self.adopted) < slots:
                job_id, job = self.waiting.popitem(last=False)
                self.changed.add(job_id)
                self.running[job_id] = self._start(job_id, job)
                self.started[job_id] = (job, time.monotonic())

    def _start(self, job_id: str, job: Job) -> subprocess.Popen[bytes] | ForkedProcess:
        """Fork the job from the zygote when its wrapper would only set the environment and run this Python on
        the entry point; else (or when the zygote is gone) start its wrapper."""
        launch = getattr(job.files, "launch", None)
        if self.zygote is not None and launch is not None and not self.zygote.gone:
            log_folder, stdout, stderr, exit_code, setup_failed = job.files.wrapper_paths()
            try:
                return self.zygote.launch(job_id, launch, {
                    "log_folder": log_folder, "stdout": stdout, "stderr": stderr, "exit_code": exit_code,
                    "setup_failed": setup_failed, "folder": str(job.files.folder)})
            except OSError as e:
                logger.warning("local: could not fork job %s (%s); it and the run's later jobs start from their "
                               "wrappers", job_id, e)
                self.zygote.gone = True
        return _start(job.files.wrapper)

    def any_ended(self) -> bool:
        """Whether a running job's process ended (looked at without reaping it); its next :meth:`update` then
        looks at once."""
        with self.lock:
            if self._told:  # (a killed job's process is reaped by kill(): forget it)
                self._told &= {popen.pid for popen in self.running.values()}
            for popen in self.running.values():
                if popen.pid in self._told:
                    continue  # news once: a process not reaped by the next poll makes no busy wait
                try:
                    ended = popen.returncode is not None or (
                        popen.poll() is not None if isinstance(popen, ForkedProcess) else
                        os.waitid(os.P_PID, popen.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None)
                except ChildProcessError:
                    ended = True  # reaped elsewhere: update() finds its code
                if ended:
                    self._told.add(popen.pid)
                    self._updated_at = 0.0
                    return True
        return False

    def _reap(self, job_id: str, popen: subprocess.Popen[bytes] | ForkedProcess) -> int | None:
        """The wrapper's exit code if it ended (else None); what it used (the wrapper and everything it waited
        for: os.wait4, or what the zygote's wait4 said of a forked job) goes into the job's usage.json, as a batch
        system's accounting would give it."""
        if isinstance(popen, ForkedProcess):
            if popen.returncode is None and popen.poll() is None:
                return None
            if job_id not in self.started:
                return popen.returncode
            cpu, max_rss = popen.cpu, popen.max_rss_kb
        else:
            if popen.returncode is not None:
                return popen.returncode
            try:
                pid, status, used = os.wait4(popen.pid, os.WNOHANG)
            except ChildProcessError:
                return popen.poll()
            if not pid:
                return None
            popen.returncode = os.waitstatus_to_exitcode(status)
            cpu, max_rss = used.ru_utime + used.ru_stime, used.ru_maxrss
        job, began = self.started.pop(job_id, (None, time.monotonic()))
        if job is not None and getattr(job.files, "exit_code", None) is not None:
            try:
                atomic_write(Path(usage_file(job.files)), measured(time.monotonic() - began, cpu, max_rss,
                                                                   host_name()))
            except OSError as e:
                logger.warning("Job %s: could not write its usage figures: %s", job_id, e)
        return popen.returncode

    def status(self, job_id: str) -> JobStatus:
        if job_id in self.running or job_id in self.adopted:
            return JobStatus.running
        if job_id in self.ended:
            return JobStatus.successful if self.ended[job_id] == 0 else JobStatus.aborted
        return JobStatus.idle if job_id in self.waiting else JobStatus.aborted

    def kill(self, jobs: list[Job], grace: float = KILL_GRACE) -> None:
        """SIGTERM to each job's process group; SIGKILL to those still there after ``grace`` seconds."""
        signalled: list[Any] = []
        with self.lock:
            for job in jobs:
                job_id = str(job.job_id)
                if self.waiting.pop(job_id, None) is not None:
                    self.ended[job_id] = -signal.SIGTERM
                elif job_id in self.running:
                    signalled.append(self.running[job_id])
                elif job_id in self.adopted:
                    signalled.append(self.adopted[job_id][0])
        for process in signalled:
            signal_group(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for process in signalled:
            if not _wait(process, max(0.0, deadline - time.monotonic())):
                logger.warning("Local job (pid %d) did not end %g s after SIGTERM: sending SIGKILL", process.pid,
                               grace)
                signal_group(process.pid, signal.SIGKILL)
                _wait(process, 30.0)
        self.update(force=True)

    def adopt(self, job_id: str, process: psutil.Process, exit_code_file: Path) -> None:
        """Follow a job that an earlier steering process started and that still runs."""
        with self.lock:
            self.adopted[job_id] = (process, exit_code_file)
            self.changed.add(job_id)

    def adopt_ended(self, job_id: str, code: int) -> None:
        """Follow a job of an earlier steering process that has ended since: its end is reported at the next poll."""
        with self.lock:
            self.ended[job_id] = code
            self.changed.add(job_id)

    def wrapper_process(self, wrapper: Path) -> psutil.Process | None:
        """The running process of the executable wrapper ``wrapper``, if any (one scan of the process table
        answers for every job of a restarted run)."""
        now = time.monotonic()
        if self._wrappers is None or now - self._wrappers_at > 5.0:
            import psutil

            self._wrappers, self._wrappers_at = {}, now
            for process in psutil.process_iter(["cmdline"]):
                for arg in process.info["cmdline"] or ():
                    if arg.endswith("executable_wrapper.sh"):
                        self._wrappers[arg] = process
        process = self._wrappers.get(str(wrapper))
        return process if process is not None and _running(process) else None


def _wait(process: Any, timeout: float) -> bool:
    """Wait for a child (Popen, ForkedProcess) or an adopted process (psutil) to end; whether it did."""
    if isinstance(process, ForkedProcess):
        return process.ends_within(timeout)
    if type(process).__module__ == "subprocess":  # Popen (a wrapper this process started)
        import subprocess

        try:
            process.wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            return False
    import psutil

    try:
        process.wait(timeout=timeout)
        return True
    except psutil.TimeoutExpired:
        return False


def _running(process: psutil.Process) -> bool:
    import psutil

    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _read_code(path: Path) -> int:
    """The exit code an adopted job's wrapper wrote (-1, a failure, if it wrote none: it was killed)."""
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return -1


class LocalSystem(BatchSystem):
    """Background processes of this machine, ``local_slots`` at once, in one run."""

    name = "local"
    job_settings = WRAPPER_SETTINGS
    on_this_host = True

    def __init__(self, run: Any) -> None:
        super().__init__(run)
        self.pool = _Pool(run.config.local_slot_count(), self._zygote(run.config.local_start))
        self._by_id: dict[str, Job] = {}

    @staticmethod
    def _zygote(mode: str) -> Zygote | None:
        """The zygote the run's jobs are forked from (made now, while the run has not started a thread), if the
        setting ``local_start`` wants one."""
        if not wanted(mode):
            return None
        try:
            return Zygote.start()
        except OSError as e:
            logger.warning("local: could not fork a zygote for this run's jobs (%s); they start from their "
                           "wrappers", e)
            return None

    def close(self) -> None:
        """The run ends: the jobs still running are waited for, up to :data:`CLOSE_GRACE` seconds in all (by then
        they are pilots told to stop, or jobs cancelled), so that their last files (exit code, usage) are written
        before the front-end removes its work dir; then the zygote ends (a forked job that still runs goes on, as a
        wrapper would)."""
        deadline = time.monotonic() + CLOSE_GRACE
        with self.pool.lock:
            processes = list(self.pool.running.values())
        for process in processes:
            _wait(process, max(0.0, deadline - time.monotonic()))
        if self.pool.zygote is not None:
            self.pool.zygote.close()

    def capacity(self) -> int:
        """Jobs that run at once: the run's local_slots."""
        return self.pool.slots()

    def submit(self, group: list[Job]) -> None:
        for job in group:
            job.job_id = self.pool.submit(job)
            self._by_id[job.job_id] = job
        self.pool.update(force=True)

    def watched(self) -> bool:
        return True

    def news(self) -> bool:
        """Whether a job's process ended (the next poll then looks at once, not an UPDATE_INTERVAL later)."""
        return self.pool.any_ended()

    def states(self, jobs: Iterable[Job]) -> dict[Job, JobState]:
        """The jobs that started or ended since the last call (the pool looks at its processes at most every
        UPDATE_INTERVAL seconds, at once when one ended)."""
        self.pool.update()
        found = {}
        for job_id in self.pool.take_changed():
            job = self._by_id.get(job_id)
            if job is not None:
                found[job] = JobState(self.pool.status(job_id))
        return found

    def cancel(self, jobs: list[Job]) -> None:
        self.pool.kill(jobs)

    def wake(self, jobs: list[Job]) -> None:
        """SIGCONT to the running jobs' process groups: a pilot ends its idle pause at once (and a process that
        was not stopped ignores it)."""
        with self.pool.lock:
            processes = [self.pool.running.get(str(job.job_id)) for job in jobs]
        for process in processes:
            if process is not None and process.returncode is None:
                signal_group(process.pid, signal.SIGCONT)

    def forget(self, job: Job) -> None:
        self.pool.ended.pop(str(job.job_id), None)
        self._by_id.pop(str(job.job_id), None)

    def attach(self, job: Job, journal: dict[str, Any]) -> bool:
        """Follow the job of a steering process that was killed: its wrapper runs on in a session of its
        own. Jobs that were still waiting for a slot were lost with that process, and are started again."""
        if journal.get("host") != host_name():
            return False
        process = self.pool.wrapper_process(job.files.wrapper) or noted_process(job.files.folder)
        if process is None and written_exit_code(job.files) != 0:
            return False  # gone without ending well: it goes again
        job.job_id = str(journal.get("job_id"))
        self._by_id[job.job_id] = job
        if process is None:
            # It ended well since the front-end looked (the front-end's check and this call are not one step):
            # followed to its end, not run again.
            self.pool.adopt_ended(job.job_id, 0)
        else:
            self.pool.adopt(job.job_id, process, job.files.exit_code)
        return True
