""":class:`Executor`: Python calls as batch jobs on the engine, handed back as futures.

A front-end (joblib, ``b2batch.Pool``) gives a list of calls; each list becomes one engine job whose result
comes back through a :class:`CallFuture` (a :class:`concurrent.futures.Future`)::

    with Executor("slurm", name="fit", settings={"slurm_settings": {"mem": "2G"}}) as executor:
        future = executor.submit(fit, 3)
        print(future.result())

The calls are cloudpickled (into the job's folder in ``work_dir`` on the shared file system for a job of its own,
into the queue's entry for a unit in a pilot or bundle), so functions of the caller's ``__main__``, lambdas and
closures work. One thread of the executor owns its engine run: it
submits in bulk within the throttle, polls every batch system once per round, and resolves futures as jobs
end. The engine submits again the jobs a batch system lost (``max_resubmissions``); a job that ended without
a result fails its future with :class:`CallJobError`, which names the job, its state and its logs, so that no
caller waits for ever. With the settings ``pilot_jobs`` or ``tasks_per_job``, the calls run in pilot or
bundle jobs instead of a job each.

Calls of :meth:`Executor.submit` that are short share jobs: the executor times them in the jobs and packs them
into units of a few tenths of a second of work (:mod:`b2batch.calls.call_packs`, sized by
:mod:`b2batch.calls.pack_sizing`); each still gets its own future, value, exception and note. ``pack=N`` packs N
calls per job, ``pack=1`` none.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import logging
import os
import pickle
import queue
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from b2batch.jobscript import base_folder
from b2batch import systems
from b2batch.calls import pickling
from b2batch.calls.calls_on_node import Outcome, PackOutcome
from b2batch.calls.call_packs import CallPack, WaitingCalls, deliver
from b2batch.calls.call_results import read_outcome, retry_reason
from b2batch.calls.futures import CallFuture, CallJobError, RemoteTraceback
from b2batch.calls.pack_sizing import PackSizer
from b2batch.engine import Job, JobFiles, Run, RunRecord
from b2batch.engine.steering import Step, Steering, drive
from b2batch.settings.runconfig import run_config
from b2batch.errors import RunStoppingError, SettingError
from b2batch.settings import SETTINGS, get_setting, unknown_setting_message
from b2batch.settings.resolve import resolve_job_config

logger = logging.getLogger(__name__)

Call = tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]


class CallSettings:
    """The settings of one executor's jobs: its own values first (checked now), then the settings chain."""

    def __init__(self, name: str, values: dict[str, Any]) -> None:
        self._name = name
        for key, value in values.items():
            if key not in SETTINGS:
                raise SettingError(unknown_setting_message(key, f"given to {name}"))
            setattr(self, key, value)
        for key in values:
            get_setting(key, task=self)  # a value of the wrong kind raises, naming this owner and the setting

    def __call__(self, key: str) -> Any:
        return get_setting(key, task=self)

    def __str__(self) -> str:
        return self._name


#: Ended jobs whose records a run of calls keeps one by one (the most recent); older ones are only counted, so
#: that a million units do not hold a million records (:class:`b2batch.engine.RunRecord`'s ``keep_ended``).
KEEP_ENDED = 10_000
class Executor:
    """Runs lists of Python calls as jobs of one batch system, in one engine run of its own."""

    def __init__(self, batch_system: Any = "auto", *, name: str = "calls", work_dir: str | os.PathLike | None = None,
                 settings: dict[str, Any] | None = None, max_in_flight: int | None = None,
                 import_path: list[str] | None = None, delete_call_file_on_load: bool = False,
                 keep_work_dir: bool | None = None, poll_pause: float = 0.1, record: Any = None,
                 log_dir: str | os.PathLike | None = None, preload: list[str] | None = None,
                 feed: Any = None, pack: int | str = "auto", unit_logs: str = "own", warm: bool = False) -> None:
        values = dict(settings or {})
        values["batch_system"] = batch_system
        self.name = name
        self.settings = CallSettings(name, values)
        #: The settings of every job of this executor, resolved once (the calls front-end's resolver).
        self.config = resolve_job_config(self.settings)
        record = record if record is not None else RunRecord(keep_ended=KEEP_ENDED)
        config = run_config(self.settings)
        if config.unit_logs == "auto":  # what auto means for this front-end's calls (Pool: pilot; the rest: own)
            config = config.replace(unit_logs=unit_logs)
        self.run = Run(record, poll_pause=poll_pause, max_in_flight=max_in_flight, config=config)
        self.run.retry_reason = retry_reason
        # job_shape (auto by default): the run decides per kind of call, as for luigi tasks (docs/job-shapes.md)
        # (``feed``: how the caller hands its calls over when it holds some back, an engine.pilots.shaping_system.Feed)
        self.system = systems.add_to_run(self.run, self.config["batch_system"], self.settings, self.config,
                                         shaping=True, feed=feed)
        root = base_folder.resolve(self.config["task_file_dir"])
        self.work_dir = (Path(work_dir) if work_dir is not None
                         else root / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}-{self.run.tag}").resolve()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        #: Where each job's stdout and stderr go (a folder per job).
        self.log_dir = Path(log_dir).resolve() if log_dir is not None else self.work_dir / "logs"
        self._work_dir_text, self._log_dir_text = str(self.work_dir), str(self.log_dir)
        self._base_dir_text = str(self.run.config.base_dir)
        #: Modules a job imports before it loads its calls (e.g. one that registers a joblib backend).
        self.preload = list(preload or [])
        #: None: keep the work dir only when a call failed or wrote to stderr.
        self.keep_work_dir = keep_work_dir
        self.delete_call_file_on_load = delete_call_file_on_load
        self.import_path = [p or os.getcwd() for p in (sys.path if import_path is None else import_path)]
        self._numbers = itertools.count()
        #: One bootstrap for all jobs: the pilot system keeps one queue per (settings, bootstrap) it sees.
        self._bootstrap = {"frontend": "calls"}
        self._futures: dict[int, CallPack] = {}  # id(job) -> its calls, for jobs not ended
        self._probes: dict[int, CallPack] = {}  # the probe packs among them (and some that ended: pruned lazily)
        #: How many calls of :meth:`submit` go into one job: measured (``pack="auto"``) or fixed (1: none packed).
        self.sizer = PackSizer(None if pack == "auto" else int(pack))
        self._waiting = WaitingCalls(self.sizer)  # calls of submit() not in a job yet
        self._requests: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self._wake = threading.Event()
        self._closing = False
        self._failed = False
        if warm:  # the first request: the run starts the workers the calls would get (local pilots) now
            self._requests.put(("warm", self._template()))
        self._thread = threading.Thread(target=self._loop, name=f"b2batch-{name}", daemon=True)
        self._thread.start()

    # --- the caller's side -------------------------------------------------------------------------

    def submit(self, function: Callable[..., Any], /, *args: Any, **kwargs: Any) -> CallFuture:
        """Run ``function(*args, **kwargs)`` in a job; a future of its value. Short calls share a job: the
        executor packs them by their measured run time (:mod:`b2batch.calls.pack_sizing`), unless ``pack=1``."""
        if self.sizer.fixed == 1:
            return self.submit_calls([(function, args, kwargs)], single=True)
        if self._closing:
            raise RuntimeError(f"{self.name}: cannot submit calls after shutdown")
        payload = self._pickled([(function, args, kwargs)])
        future = CallFuture(self, None, True, next(self._numbers))
        if self._waiting.add(payload, future):
            self._wake.set()
        return future

    def _pickled(self, calls: list[Call]) -> bytes:
        try:
            return pickling.dumps(list(calls))
        except Exception as e:
            first = calls[0][0] if calls else None
            raise pickle.PicklingError(f"{self.name}: the call {getattr(first, '__qualname__', first)!r} or its "
                                       f"arguments cannot be pickled to send them to a job: {e}") from e

    def submit_calls(self, calls: list[Call], label: str | None = None, single: bool = False) -> CallFuture:
        """Run ``calls`` one after another in one job; a future of the list of their values."""
        future = self.prepare_calls(calls, label, single)
        self.send([future])
        return future

    def prepare_calls(self, calls: list[Call], label: str | None = None, single: bool = False) -> CallFuture:
        """:meth:`submit_calls` without the submission: the future, its calls pickled and its job made, for
        :meth:`send` (a caller that submits many at once hands them to the executor's thread in one request)."""
        if self._closing:
            raise RuntimeError(f"{self.name}: cannot submit calls after shutdown")
        payload = self._pickled(calls)
        number = next(self._numbers)
        return CallFuture(self, self._job(number, label, payload), single, number)

    def send(self, futures: list[CallFuture]) -> None:
        """Submit the jobs of futures :meth:`prepare_calls` made, in their order."""
        if futures:
            self._requests.put(("submit", futures))
            self._wake.set()

    def _job(self, number: int, label: str | None, payload: bytes, last: int | None = None) -> Job:
        """The job of one submission (``last`` None), or of a pack of calls ``number`` to ``last``, with its calls
        (and its call file and wrapper when it gets a job of its own)."""
        key = f"{number:08d}"
        files = JobFiles.at(self._work_dir_text, "jobs", key, f"{self._log_dir_text}/{key}")
        runner = "run_calls" if last is None else "run_pack"
        unit = {"call": f"b2batch.calls.calls_on_node:{runner}", "preload": self.preload,
                "args": [f"{files.folder_text}/call.pkl", files.path_of("result_bytes"), self.import_path,
                         self.delete_call_file_on_load, self._base_dir_text]}
        numbers = f"#{number}" if last is None or last == number else f"#{number}-{last}"
        job = Job(key=key, name=f"{label or self.name} {numbers}", family=label or self.name, system=self.system,
                  files=files, config=self.config, params={"call": str(number)}, unit=unit,
                  bootstrap=self._bootstrap, settings_key=self.settings, journaled=False)
        # The call file is written when the job needs it: a unit in a pilot or bundle carries it in its entry
        # (no job folder), a job of its own gets it with its wrapper (here, or from a shaped run).
        job.inline = (job.unit["args"][0], payload)
        if self.run.needs_job_script(job) and not self.run.writes_job_scripts(job):
            job.write_inline()
            from b2batch.jobscript import wrapper

            wrapper.write_job_script(job.files, self.settings, job.key, self.config,
                                     spec={"frontend": "calls", "unit": job.unit})
        return job

    def _template(self) -> Job:
        """A job like this executor's units, without calls: what workers started ahead are made for."""
        files = JobFiles.at(self._work_dir_text, "jobs", "workers", f"{self._log_dir_text}/workers")
        return Job(key="workers", name=self.name, family=self.name, system=self.system, files=files,
                   config=self.config, bootstrap=self._bootstrap, settings_key=self.settings, journaled=False)

    def cancel(self, futures: Iterable[CallFuture]) -> None:
        """Cancel these futures (those not ended) and their jobs, with one cancel command per batch system."""
        chosen = [future for future in futures if not future.done() and concurrent.futures.Future.cancel(future)]
        if chosen:
            self._requests.put(("cancel", chosen))
            self._wake.set()

    def in_flight(self) -> int:
        """Jobs submitted that have not ended, and calls waiting for one."""
        return len(self._futures) + self._requests.qsize() + len(self._waiting)

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        """No more calls. ``cancel_futures``: cancel those not ended (their jobs too); ``wait``: until the
        rest ended. Then the run ends (worker jobs stop) and the work dir is removed unless it is kept."""
        if not self._closing:
            self._closing = True
            self._requests.put(("cancel-all" if cancel_futures else "close", None))
            self._wake.set()
        if wait or cancel_futures:
            self._thread.join()
            self._remove_work_dir()

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, exc_type: Any, *rest: Any) -> None:
        self.shutdown(cancel_futures=exc_type is not None)

    def _remove_work_dir(self) -> None:
        keep = self.keep_work_dir
        if keep is None:
            keep = self._failed or any(p.stat().st_size for p in self.log_dir.glob("*/stderr"))
        if keep:
            if self.keep_work_dir is None:  # (a front-end that asked to keep it decides itself and says so)
                logger.info("%s: the work dir is kept: %s", self.name, self.work_dir)
            return
        deadline = time.monotonic() + 5.0  # pilots with their queue in the work dir leave it within moments
        while any(self.work_dir.glob("_pilots/*/workers/*.json")) and time.monotonic() < deadline:
            time.sleep(0.02)
        shutil.rmtree(self.work_dir, ignore_errors=True)

    # --- the executor's thread -----------------------------------------------------------------------

    def _loop(self) -> None:
        try:
            drive(self.run, _ExecutorSteering(self))
        except RunStoppingError as e:  # no job of the run can go (e.g. the scheduler's tools are missing)
            logger.error("%s: %s", self.name, e)
            self._fail_all(e)
        except BaseException as e:  # nothing may wait for ever on a future of a dead thread
            logger.exception("%s: the executor stopped", self.name)
            self._fail_all(e)
        finally:
            self.run.close()

    def _take_requests(self) -> bool:
        """Submit and cancel what the caller asked for; whether the caller is closing."""
        closing = self._closing
        cancelled: list[Job] = []  # one cancel command per batch system for all of them
        while True:
            try:
                kind, future = self._requests.get_nowait()
            except queue.Empty:
                if cancelled:
                    self.run.cancel(cancelled, reason="cancelled by the caller")
                return closing
            if kind == "submit":
                for one in future:
                    if not one.cancelled():
                        self._futures[id(one.job)] = CallPack([one], packed=False)
                        self.run.submit(one.job)
            elif kind == "cancel":
                cancelled += self._cancelled_jobs(future)
            elif kind == "warm":
                self.run.warm(future)
            else:  # "close", or "cancel-all"
                if kind == "cancel-all":
                    self.run.interrupt()
                    for pack in self._futures.values():
                        for pending in pack.futures:
                            pending.cancel()
                    self._futures.clear()
                    for waiting in self._waiting.drain():
                        waiting.cancel()
                    self._drop_waiting()
                closing = True

    def _cancelled_jobs(self, futures: list[CallFuture]) -> list[Job]:
        """The jobs to cancel for these cancelled futures: those none of whose calls is still wanted (a call not
        packed yet is left out when its pack is made)."""
        jobs = []
        for future in futures:
            pack = self._futures.get(id(future.job)) if future.job is not None else None
            if pack is not None and not pack.live():
                del self._futures[id(future.job)]
                jobs.append(future.job)
        return jobs

    # --- packs of calls of submit() -------------------------------------------------------------------

    def _pack_waiting(self, closing: bool) -> None:
        """Put the calls that wait into jobs (:meth:`WaitingCalls.packs`)."""
        out = self._watch_probes() if self.sizer.probing else 0
        probes = out if self.sizer.probing else 0
        for members, probe in self._waiting.packs(probes, closing):
            self._submit_pack(members, probe)

    def _submit_pack(self, members: list[tuple[bytes, CallFuture]], probe: bool) -> None:
        futures = [future for _payload, future in members]
        try:
            job = self._job(futures[0].number, None, pickle.dumps([payload for payload, _future in members]),
                            last=futures[-1].number)
        except Exception as e:  # noqa: BLE001 - e.g. the job's folder cannot be written: these calls fail
            for future in futures:
                future.set_exception(e)
            return
        for future in futures:
            future.job = job
        self._futures[id(job)] = pack = CallPack(futures, packed=True, probe=probe)
        if probe:
            self._probes[id(job)] = pack
        self.run.submit(job)

    def _watch_probes(self) -> int:
        """A probe that has run PROBE_PATIENCE seconds makes the calls long without waiting for its end; the
        probes in flight (looked at alone: not every job in flight, each round)."""
        now = time.time()
        for key, pack in list(self._probes.items()):
            if self._futures.get(key) is not pack:  # it ended, or was cancelled
                del self._probes[key]
                continue
            record = self.run.record.jobs.get(pack.futures[0].job.key)
            if record is not None and record.started_at:
                self.sizer.running_long(now - record.started_at)
        return len(self._probes)

    def _drop_waiting(self) -> None:
        while True:
            try:
                _kind, future = self._requests.get_nowait()
            except queue.Empty:
                return
            for each in future if isinstance(future, list) else [future] if future is not None else []:
                each.cancel()

    def _finish(self, job: Job) -> None:
        pack = self._futures.pop(id(job), None)
        if pack is None or not pack.live():
            return
        if pack.packed:
            self._finish_pack(job, pack)
            return
        future = pack.futures[0]
        outcome = read_outcome(job)
        if outcome is not None and outcome.error is None and job.outcome.exit_code == 0:
            self.run.settle(job, True)
            future.set_result(outcome.values[0] if future.single else outcome.values)
            return
        self._failed = True
        if outcome is not None and outcome.error is not None:
            error = outcome.error
            error.__cause__ = RemoteTraceback(outcome.traceback)
            where = f"call {outcome.index} of " if outcome.index is not None and not future.single else ""
            error.add_note(f"Raised in {where}{job.name}: {job.system} job {job.job_id} (log: {job.files.stderr})")
            self.run.settle(job, False, f"{type(error).__name__}: {error}")
        else:
            error = CallJobError(job.failure_message())
            self.run.settle(job, False, str(error))
        future.set_exception(error)

    def _finish_pack(self, job: Job, pack: CallPack) -> None:
        """Each call of a pack gets its own value or exception; the job is judged by its calls."""
        read = read_outcome(job)
        outcomes = read.outcomes if isinstance(read, PackOutcome) else None
        if outcomes is None or len(outcomes) != len(pack.futures) or job.outcome.exit_code != 0:
            error = read.error if isinstance(read, Outcome) and read.error is not None else None
            message = f"{type(error).__name__}: {error}" if error is not None else job.failure_message()
            self._failed = True
            self.run.settle(job, False, message)
            for future in pack.live():
                failure = CallJobError(message)
                failure.add_note(f"Call #{future.number}, one of {len(pack.futures)} packed in {job.name}: "
                                 f"{job.system} job {job.job_id} (log: {job.files.stderr})")
                future.set_exception(failure)
            return
        self.sizer.timed(len(outcomes), sum(outcome.seconds for outcome in outcomes))
        failures = deliver(self.name, job, pack, outcomes, RemoteTraceback)
        self._failed = self._failed or bool(failures)
        self.run.settle(job, not failures, "; ".join(failures[:3]) + (" ..." if len(failures) > 3 else ""))

    def _fail_all(self, error: BaseException) -> None:
        self._failed = True
        waiting = self._waiting.drain()
        for future in [each for pack in self._futures.values() for each in pack.futures] + waiting:
            if not future.done():  # the run's own message as it is, each call its own exception
                future.set_exception(RunStoppingError(str(error)) if isinstance(error, RunStoppingError)
                                     else CallJobError(f"{self.name}: the executor stopped: {error!r}"))
        self._futures.clear()
        self._drop_waiting()


class _ExecutorSteering(Steering):
    """The executor's thread on the engine's loop: callers' requests in, ended jobs to their futures, until the
    executor is closing and nothing is left; between polls it waits for the poll pause or a new request."""

    def __init__(self, executor: Executor) -> None:
        self.executor = executor
        self.closing = False

    def feed(self) -> None:
        self.closing = self.executor._take_requests()
        self.executor._pack_waiting(self.closing)

    def ended(self, job: Job) -> None:
        self.executor._finish(job)

    def step(self, ended: int) -> Step:
        executor = self.executor
        idle = not executor._futures and not executor._waiting and executor._requests.empty()
        if self.closing and idle:
            return Step.STOP
        return Step.AGAIN if ended else Step.WAIT  # what ended may let calls go (the probes size the packs)

    def pause(self, run: Run) -> None:
        run.wait(wake=self.executor._wake)
        self.executor._wake.clear()
