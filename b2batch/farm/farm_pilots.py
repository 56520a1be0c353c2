"""A farm as pilot jobs: the steering process submits ``--jobs`` pilots through the engine, each a farmer of
``--proc`` processes on the same work dir, follows them, and ends with the summary of the lines.

The pilots share the list through the work dir's lock like farmers on one node. The engine submits them
together (an array where the batch system has arrays), within the throttle, and submits again pilots the
batch system lost (``max_resubmissions``). When every pilot has ended and lines are left (a pilot was killed,
or ran out of walltime), the steering process submits a new round of pilots, as long as each round gets
lines done. On Slurm the pilots are submitted with ``--requeue`` and ``--signal=B:USR1@N``: a pilot whose time
runs out puts its running lines back and asks Slurm to requeue it (which also serves ``--submit-only``).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from b2batch.engine.steering import Step, Steering, drive
from b2batch.farm.definitions import FarmError
from b2batch.farm.display import FarmProgress, summary
from b2batch.farm.stopping import STOP_SIGNALS as FARMER_STOP_SIGNALS
from b2batch.farm.stopping import exit_code_of
from b2batch.farm.runners import load_runner
from b2batch.farm.tasklist import load_handler
from b2batch.farm.workdir import WorkDir
from b2batch.settings.resolve import resolve_job_config

logger = logging.getLogger(__name__)

#: Signals that stop the steering process (``--timeout`` is kept by the steering loop itself).
STOP_SIGNALS = sorted(FARMER_STOP_SIGNALS - {signal.SIGALRM})
#: Seconds beyond ``--kill-grace`` the steering process waits for its pilots' farmers to put their lines back.
STOP_MARGIN = 2.0


class FarmSettings:
    """The farm's own settings, looked up before the settings chain (as a task's attributes are)."""

    def __init__(self, **values: Any) -> None:
        self.__dict__.update(values)

    def __str__(self) -> str:
        return "farm"


def pilot_command(args: argparse.Namespace, workdir: WorkDir, lock_dir: str | None, requeue: bool,
                  steering: str = "") -> list[str]:
    """The farmer a pilot runs (``executable`` is prepended by the caller)."""
    command = ["-m", "b2batch.farm", os.path.abspath(args.tasklist), "--workdir", str(workdir.path),
               "--proc", str(args.proc), "--runner", args.runner, "--tasklist", args.tasklisthandler,
               "--heartbeat-timeout", f"{args.heartbeat_timeout:g}", "--kill-grace", f"{args.kill_grace:g}",
               "--pilot"]
    if steering:
        command += ["--steering", steering]
    if args.timeout and args.submit_only:  # without a steering process, each pilot's farmer keeps the time
        command += ["--timeout", str(args.timeout)]
    if lock_dir:
        command += ["--lock-dir", os.path.abspath(lock_dir)]
    if args.walltime:
        command += ["--walltime", f"{args.walltime:g}"]
    if args.task_seconds:
        command += ["--task-seconds", f"{args.task_seconds:g}"]
    if args.verb:
        command.append("--verbose")
    if not requeue:
        command.append("--no-requeue")
    else:
        command += ["--signal-seconds", str(args.signal_seconds)]
    return command


class FarmSteering(Steering):
    """The pilots of one farm and the run that follows them."""

    def __init__(self, args: argparse.Namespace, lock_dir: str | None) -> None:
        from b2batch import systems
        from b2batch.engine import Run
        from b2batch.settings.runconfig import run_config
        from b2batch.settings import get_setting

        self.args = args
        name = args.batch_system or str(get_setting("batch_system"))
        self.system = systems.detect() if name == "auto" else name
        system_class = systems.system_class(self.system)
        if args.submit_only and self.system == "local":
            raise FarmError("--submit-only needs a batch system that runs jobs without b2batch: local pilots are "
                            "processes of the steering process. Drop --submit-only, or use another "
                            "--batch-system.")
        self.workdir = WorkDir(args.workdir if args.workdir is not None else args.tasklist + "_workdir", lock_dir,
                               args.heartbeat_timeout)
        self.handler = load_handler(args.tasklisthandler, args.tasklist, self.workdir.path)
        load_runner(args.runner)  # a wrong runner fails here, not in every pilot
        note = self.workdir.prepare(self.handler.tasks, args.tasklist)
        if note:
            print(time.asctime(), note, flush=True)
        self.requeue = args.requeue and self.system == "slurm"
        values: dict[str, Any] = {"working_dir": os.getcwd(), "task_file_dir": str(self.workdir.own / "jobs"),
                                  "job_name": f"farm-{Path(args.tasklist).stem}"[:40]}
        if self.requeue:
            values["slurm_settings"] = {**(get_setting("slurm_settings") or {}), "requeue": True,
                                        "signal": f"B:USR1@{args.signal_seconds}"}
        self.settings = FarmSettings(**values)
        self.lookup = lambda key: get_setting(key, task=self.settings)
        self.run = Run(config=run_config(self.lookup, batch_system=self.system))
        #: The settings of every pilot of the farm, resolved once (the farm's resolver).
        self.config = resolve_job_config(self.settings, batch_system=self.system)
        self.command = pilot_command(args, self.workdir, lock_dir, self.requeue,
                                     "" if args.submit_only else self.run.tag)
        self.run.add_system(self.system, system_class)
        self.pilots: list[Any] = []
        self.problems: list[str] = []
        #: The stop signal that came (SIGALRM for --timeout), or None.
        self.stop: int | None = None

    def make_pilot(self, key: str) -> Any:
        from b2batch.jobscript import wrapper
        from b2batch.engine import Job, JobFiles

        folder = self.workdir.own / "jobs"
        files = JobFiles.at(folder, "pilots", key, log_folder=folder / "pilots" / key / "logs")
        job = Job(key=key, name=f"farm pilot {key}", family="farm", system=self.system, files=files,
                  config=self.config)
        files.make_folders()
        wrapper.write_job_script(files, self.settings, key, self.config, command=self.command)
        return job

    def submit_round(self, count: int, round_number: int) -> None:
        for i in range(count):
            job = self.make_pilot(f"pilot-{i}" if round_number == 0 else f"pilot-{i}-round{round_number}")
            self.pilots.append(job)
            self.run.submit(job)

    def lines_left(self) -> int:
        return self.workdir.counts()["toprocess"] + sum(len(ids) for ids in self.workdir.running().values())

    def done_count(self) -> int:
        counts = self.workdir.counts()
        return counts["finished"] + counts["failed"]

    def pilot_states(self) -> dict[str, int]:
        states = {"queued": 0, "running": 0, "ended": 0}
        for job in self.pilots:
            if job.outcome is not None:
                states["ended"] += 1
            elif self.run.interrupted:
                states["cancelled"] = states.get("cancelled", 0) + 1
            else:
                record = self.run.record.jobs.get(job.key) if hasattr(self.run.record, "jobs") else None
                state = getattr(record, "state", "")
                states["running" if state == "running" else "queued"] += 1
        return states

    def submit_only(self) -> int:
        self.submit_round(self.args.jobs or 1, 0)
        if any(job.job_id is None and job.outcome is None for job in self.pilots):
            drive(self.run, _UntilSubmitted(self))
        for job in self.pilots:
            if job.job_id is not None:
                print(f"submitted pilot {job.key}: {self.system} job {job.job_id} (log {job.files.stdout})")
        for problem in self.problems:
            print(problem, file=sys.stderr)
        print(f"The pilots share {self.workdir.path}; follow it with: b2batch farm {self.args.tasklist} --workdir "
              f"{self.workdir.path} --batch-system {self.system} --jobs {self.args.jobs or 1}   (or read its "
              f"toprocess, finished and failed files)")
        return 0 if not self.problems else 1

    def steer(self) -> int:
        total = len(self.handler)
        jobs = self.args.jobs or 1
        if not self.lines_left():
            summary(self.workdir, handler=self.handler)
            return 0
        progress = FarmProgress(self.workdir, total)
        live = None
        if self.lookup("live_state"):  # for b2batch monitor WORKDIR
            from b2batch.engine.livestate import start_live_state

            live = start_live_state(self.run.record, self.workdir.own, self.run.tag,
                                    {"front_end": "farm", "script": "b2batch", "argv": sys.argv[1:]})
        previous = {signum: signal.signal(signum, self._stop_signal) for signum in STOP_SIGNALS}
        self._deadline = time.monotonic() + self.args.timeout if self.args.timeout else None
        self._progress, self._live, self._round, self._done_at_round = progress, live, 0, self.done_count()
        try:
            self.submit_round(min(jobs, self.lines_left()), self._round)
            if self.stop is None:
                drive(self.run, self)
        except KeyboardInterrupt:  # a SIGINT that came before the handlers were in place
            self.stop = signal.SIGINT
        try:
            if self.stop is not None:
                self.stop_pilots(self.stop)
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            self.run.close()
            lines = progress.update(self.pilot_states(), force=True)
            progress.close()
            if live is not None:
                live.note(farm=lines)
                live.stop(f"stopped by {'the timeout' if self.stop == signal.SIGALRM else signal.Signals(self.stop).name}"
                          if self.stop is not None else f"{lines.get('toprocess', 0)} line(s) left"
                          if lines.get("toprocess") else f"{lines.get('failed', 0)} line(s) failed"
                          if lines.get("failed") else "success")
        for problem in self.problems:
            print(problem, file=sys.stderr, flush=True)
        summary(self.workdir, handler=self.handler)
        if self.stop is not None:
            return exit_code_of(self.stop)
        return 1 if self.lines_left() else 0

    def _stop_signal(self, signum: int, frame: Any) -> None:
        if self.stop is None:
            self.stop = signum
            print(f"{time.strftime('%H:%M:%S')} {signal.Signals(signum).name}: stopping the farm", flush=True)

    def stop_pilots(self, signum: int) -> None:
        """Cancel every pilot (their farmers get SIGTERM, or SIGKILL where the batch system sends that), wait
        for their farmers to put their running lines back, and put back those of farmers that died first.
        Within ``--kill-grace`` plus a few seconds."""
        by = "the timeout" if signum == signal.SIGALRM else signal.Signals(signum).name
        killed = self.run.interrupt()
        me = f"steering-{self.run.tag}"
        deadline = time.monotonic() + self.args.kill_grace + STOP_MARGIN
        while time.monotonic() < deadline:
            own = self._own_farmers()
            if not own or set(own) <= set(self.workdir.dead_farmers(me)):  # ended, or killed (SGE's qdel)
                break
            time.sleep(0.1)
        with self.workdir.locked():
            recovered = self.workdir.recover_locked(me, self.handler.tasks)
        left = self._own_farmers()
        print(f"{time.strftime('%H:%M:%S')} Stopped by {by}: cancelled {len(killed)} pilot job(s)"
              + (f", put back the {len(recovered)} line(s) their killed farmers held" if recovered else "")
              + (f"; {len(left)} farmer(s) of these pilots still run: {', '.join(left)} (their lines go back when "
                 f"they end, or when their heartbeat is {self.args.heartbeat_timeout:g} s old)" if left else ""),
              flush=True)

    def _own_farmers(self) -> list[str]:
        """The farmers of this steering process's pilots that are still registered in the work dir."""
        own = []
        for beat in self.workdir.claims.glob("*.json"):
            try:
                if json.loads(beat.read_text()).get("steering") == self.run.tag:
                    own.append(beat.stem)
            except (OSError, ValueError):
                continue
        return own

    # the engine's loop (engine/steering.py): pilots ended, rounds of pilots while lines are left, stop signals

    def feed(self) -> None:
        if self._deadline is not None and time.monotonic() >= self._deadline and self.stop is None:
            self.stop = signal.SIGALRM

    def step(self, ended: int) -> Step:
        if self.stop is not None:
            return Step.STOP
        lines = self._progress.update(self.pilot_states())
        if self._live is not None:
            self._live.note(farm=lines)
        if not self.run.live:
            with self.workdir.locked():  # lines of pilots' farmers that were killed go back first
                self.workdir.recover_locked(f"steering-{self.run.tag}", self.handler.tasks)
            left, done = self.lines_left(), self.done_count()
            if not left:
                return Step.STOP
            if done == self._done_at_round:
                self.problems.append(f"{left} line(s) are left, and the last round of pilots got none done: "
                                     f"not submitting more. Run the same command again to go on.")
                return Step.STOP
            self._round += 1
            self._done_at_round = done
            jobs = self.args.jobs or 1
            print(f"{time.strftime('%H:%M:%S')} all pilots ended with {left} line(s) left: submitting "
                  f"{min(jobs, left)} more (round {self._round})", flush=True)
            self.submit_round(min(jobs, left), self._round)
        return Step.WAIT

    def pause(self, run: Any) -> None:
        deadline = self._deadline
        run.wait(min(run.poll_pause, max(0.0, deadline - time.monotonic())) if deadline is not None else None)

    def ended(self, job: Any) -> None:
        from b2batch.engine import JobStatus

        ok = job.outcome is not None and job.outcome.status == JobStatus.successful
        message = "" if ok else pilot_failure(job)
        if message:
            self.problems.append(message)
        self.run.settle(job, ok, message.splitlines()[0] if message else "")


def pilot_failure(job: Any) -> str:
    """Why a pilot failed, naming the farm's pilot (not an engine task), its job, and its logs."""
    text = job.failure_message()
    head, _, rest = text.partition("\n")
    if " failed: " in head:
        head = f"b2batch farm: pilot {job.key} failed: " + head.split(" failed: ", 1)[1]
    elif " could not be submitted " in head:
        head = f"b2batch farm: pilot {job.key} could not be submitted " + head.split(" could not be submitted ", 1)[1]
    return head + ("\n" + rest if rest else "")


def steer(args: argparse.Namespace, lock_dir: str | None) -> int:
    """Run the farm ``args`` as pilot jobs; the exit code."""
    from b2batch.jobscript import base_folder

    with base_folder.base_dir_pinned(os.getcwd()):  # relative settings paths are relative to where the farm starts
        steering = FarmSteering(args, lock_dir)
        return steering.submit_only() if args.submit_only else steering.steer()


class _UntilSubmitted(Steering):
    """``--submit-only``: the engine's loop until every pilot has its job id (or could not be submitted), at most
    10 minutes."""

    def __init__(self, farm: FarmSteering) -> None:
        self.farm = farm
        self.deadline = time.monotonic() + 600

    def ended(self, job: Any) -> None:
        if job.outcome is not None and job.not_submitted:
            self.farm.problems.append(pilot_failure(job))

    def step(self, ended: int) -> Step:
        waiting = any(job.job_id is None and job.outcome is None for job in self.farm.pilots)
        return Step.WAIT if waiting and time.monotonic() <= self.deadline else Step.STOP
