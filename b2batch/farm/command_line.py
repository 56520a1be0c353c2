"""The command lines: ``b2batch farm`` (also ``python -m b2batch.farm``) and ``pytaskfarmer.py``, which takes
PyTaskFarmer's options unchanged."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from typing import Any

from b2batch.errors import B2BatchError
from b2batch.farm.definitions import FarmError, as_bool
from b2batch.farm.stopping import DIE_BY

LOCK_DIR_VARIABLE = "B2BATCH_FARM_LOCK_DIR"


def add_arguments(parser: argparse.ArgumentParser, compat: bool = False) -> None:
    """The options of a farm (``compat``: ``--verbose`` takes a value, as PyTaskFarmer's does)."""
    parser.add_argument("tasklist", metavar="List", help="the task list: one command per line")
    parser.add_argument("--proc", "-n", metavar="Processes", type=int, nargs="?", default=8, const=None,
                        help="lines at once per farmer (default 8; without a number: the number of CPUs)")
    parser.add_argument("--timeout", type=int, default=None,
                        help="stop after this many seconds: running lines go back into toprocess, exit 1")
    parser.add_argument("--workdir", "-w", default=None, help="the work dir (default: <tasklist>_workdir)")
    if compat:
        parser.add_argument("--verbose", "-v", dest="verb", type=as_bool, default=False, metavar="VERB",
                            help="True: a line per task started and ended")
    else:
        parser.add_argument("--verbose", "-v", dest="verb", action="store_true",
                            help="a line per task started and ended")
    parser.add_argument("--runner", "-r", default="default",
                        help="how a line runs: default (/bin/sh -c), split (no shell), or a runner of "
                             "~/.b2batch/runners.d/*.ini or ~/.pytaskfarmer/runners.d/*.ini")
    parser.add_argument("--tasklist", "-t", dest="tasklisthandler", default="default",
                        help="the task-list handler: default (a command per line) or one of the INI files")
    more = parser.add_argument_group("b2batch")
    more.add_argument("--lock-dir", default=None,
                      help=f"where the work dir's lock is kept, for file systems without locks (default: "
                           f"${LOCK_DIR_VARIABLE}, else the work dir{'; pytaskfarmer.py: also $SCRATCH' if compat else ''})")
    more.add_argument("--heartbeat-timeout", type=float, default=60.0,
                      help="seconds without a heartbeat after which a farmer counts as dead and its lines go back "
                           "(default 60)")
    more.add_argument("--walltime", type=float, default=None,
                      help="seconds this farmer may run; no line is taken that could not end in time")
    more.add_argument("--task-seconds", type=float, default=None,
                      help="seconds a line needs at most (default: the longest so far), for --walltime")
    more.add_argument("--kill-grace", type=float, default=5.0,
                      help="seconds a stopped line has after SIGTERM before SIGKILL (default 5)")
    batch = parser.add_argument_group("batch jobs")
    batch.add_argument("--batch-system", default=None,
                       help="run the farm as pilot jobs on slurm, sge, htcondor, lsf, local or auto")
    batch.add_argument("--jobs", "-j", type=int, default=None,
                       help="pilot jobs, each a farmer of --proc processes (default 1 with --batch-system)")
    batch.add_argument("--submit-only", action="store_true",
                       help="submit the pilots and exit; they share the work dir without a steering process")
    batch.add_argument("--no-requeue", dest="requeue", action="store_false",
                       help="Slurm: no --requeue and no USR1 signal before the time limit")
    batch.add_argument("--signal-seconds", type=int, default=120,
                       help="Slurm: the pilot gets USR1 this long before its time limit (default 120)")
    batch.add_argument("--pilot", action="store_true", help=argparse.SUPPRESS)  # a farmer in a pilot job
    batch.add_argument("--steering", default="", help=argparse.SUPPRESS)  # the tag of the pilot's steering process


def workdir_of(args: argparse.Namespace) -> str:
    return args.workdir if args.workdir is not None else args.tasklist + "_workdir"


def lock_dir_of(args: argparse.Namespace, compat: bool) -> str | None:
    if args.lock_dir:
        return args.lock_dir
    if os.environ.get(LOCK_DIR_VARIABLE):
        return os.environ[LOCK_DIR_VARIABLE]
    if compat and os.environ.get("SCRATCH"):
        return os.environ["SCRATCH"]
    return None


def check(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    if args.proc is None:
        args.proc = os.cpu_count() or 1
    if args.proc < 1:
        parser.error(f"--proc must be at least 1, not {args.proc}")
    if args.timeout is not None and args.timeout <= 0:
        parser.error(f"--timeout must be a positive number of seconds, not {args.timeout}")
    if args.jobs is not None and args.jobs < 1:
        parser.error(f"--jobs must be at least 1, not {args.jobs}")
    if args.submit_only and args.batch_system is None and args.jobs is None:
        parser.error("--submit-only submits pilot jobs: give --batch-system (and --jobs)")


def run_local(args: argparse.Namespace, compat: bool, summary: bool) -> int:
    from b2batch.farm import display
    from b2batch.farm.farmer import Farmer, FarmerOptions
    from b2batch.farm.runners import load_runner
    from b2batch.farm.tasklist import load_handler
    from b2batch.farm.workdir import WorkDir

    workdir_path = workdir_of(args)
    if not args.pilot:
        print(_now(), "Working on task list", args.tasklist, flush=True)
        print(_now(), "Will store progress in", workdir_path, flush=True)
        if compat:
            print(_now(), "Will store logs in", workdir_path + "/logs", flush=True)
    if not os.path.exists(args.tasklist):
        raise FarmError(f"The task list {args.tasklist} does not exist. Give the path of a text file with one "
                        f"command per line.")
    workdir = WorkDir(workdir_path, lock_dir_of(args, compat), args.heartbeat_timeout)
    workdir.logs.parent.mkdir(parents=True, exist_ok=True)
    handler = load_handler(args.tasklisthandler, args.tasklist, workdir_path)
    runner = load_runner(args.runner)
    note = workdir.prepare(handler.tasks, args.tasklist)
    if note:
        print(_now(), note, flush=True)
    print(_now(), "Found", len(handler), "total tasks", flush=True)
    options = FarmerOptions(proc=args.proc, timeout=args.timeout, verbose=args.verb, walltime=args.walltime,
                            in_batch_job=args.pilot, task_seconds=args.task_seconds, kill_grace=args.kill_grace,
                            requeue=args.pilot and args.requeue, heartbeat_timeout=args.heartbeat_timeout,
                            steering=args.steering, signal_seconds=args.signal_seconds)
    result = Farmer(workdir, handler, runner, options).run()
    if summary:
        display.summary(workdir, handler=handler)
    return result.exit_code


def _now() -> str:
    return time.asctime()


def run(args: argparse.Namespace, parser: argparse.ArgumentParser, compat: bool = False) -> int:
    check(args, parser)
    try:
        if (args.batch_system is not None or args.jobs is not None) and not args.pilot:
            from b2batch.farm.farm_pilots import steer

            code = steer(args, lock_dir_of(args, compat))
        else:
            code = run_local(args, compat, summary=not compat and not args.pilot)
    except (FarmError, B2BatchError) as e:
        print(f"{parser.prog}: error: {e}", file=sys.stderr, flush=True)
        return 2
    if code - 128 in DIE_BY:
        die_by(code - 128)
    return code


def die_by(signum: int) -> None:
    """End this process as killed by ``signum`` (after the farm was stopped cleanly by it), so that its parent
    sees what PyTaskFarmer's parent sees."""
    sys.stdout.flush()
    sys.stderr.flush()
    signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
    os.kill(os.getpid(), signum)
    time.sleep(5)  # the signal ends the process before this returns


def main(argv: list[str] | None = None, prog: str = "b2batch farm") -> int:
    """``b2batch farm TASKLIST [options]``."""
    parser = argparse.ArgumentParser(prog=prog, description="Run the lines of a task list on local cores or as "
                                     "pilot jobs; restartable, shared by several farmers (PyTaskFarmer's files).")
    add_arguments(parser)
    return run(parser.parse_args(argv), parser)


def pytaskfarmer_main(argv: list[str] | None = None) -> int:
    """``pytaskfarmer.py``: PyTaskFarmer's command line, run by b2batch's farmer."""
    parser = argparse.ArgumentParser(prog="pytaskfarmer.py", description="Simple task queue (b2batch farm)")
    add_arguments(parser, compat=True)
    args = parser.parse_args(argv)
    args.verb = True  # PyTaskFarmer prints each line's start and end whatever --verbose says
    return run(args, parser, compat=True)


def add_subcommand(commands: Any) -> None:
    """Register ``farm`` with the ``b2batch`` command's subparsers."""
    sub = commands.add_parser("farm", help="Run the lines of a task list on local cores or as pilot jobs.",
                              description="Run the lines of a task list on local cores or as pilot jobs "
                                          "(PyTaskFarmer's options and files).")
    add_arguments(sub)


if __name__ == "__main__":
    sys.exit(main())
