"""Failure injection for the emulators: ``python -m b2batch.emulators inject SYSTEM KIND ...``.

Kinds (SYSTEM is ``htcondor`` or ``lsf`` unless noted)::

    fail-submits N                 the next N submits fail with a realistic error and exit status
    delay SECONDS                  queries show the state as it was SECONDS ago (0 switches it off)
    submit-delay SECONDS           submits wait SECONDS after the jobs are queued before they print their ids
                                   (a submitter killed meanwhile has jobs it never heard of; 0 switches it off)
    lose JOB [--as UNKWN|ZOMBI|vanish]
                                   the job's host is lost: its processes die; HTCondor jobs vanish
                                   from queue and history, LSF jobs show UNKWN (default), ZOMBI or vanish
    hold JOB [--reason R] [--code C] [--subcode S]      (htcondor) hold a job; a running one is killed
    release JOB                    (htcondor) release a held job: it becomes idle and runs again
    hold-next [N] [--reason R] [--code C]               (htcondor) the next N jobs go on hold at start
    exit-next [N] [--code C] [--reason R]
                                   the next N submitted jobs end with exit code C without running (LSF: R is
                                   their EXIT_REASON, e.g. "TERM_MEMLIMIT: job killed after reaching LSF
                                   memory usage limit")
    nodes NAME,NAME...             (lsf) jobs are placed on these emulated nodes ("" : this machine alone) and
                                   avoid those their submission excludes (LSF: select[hname!=NAME])
    bad-node NAME [--clear]        (lsf) node NAME fails every job that starts there before it runs (exit 1, no
                                   wrapper: a lost file system); --clear makes it good again
    crash                          kill every runner and job process, as a reboot would
    status                         print the active injections as JSON
    clear                          switch every injection off

JOB is ``16`` or ``16.0`` for HTCondor, ``123`` or ``123[4]`` for LSF.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
from typing import Any

from b2batch.emulators import htcondor_jobs, slots, job_table
from b2batch.emulators.common import current_user, err, out
from b2batch.emulators.job_table import JobTable, Store

logger = logging.getLogger(__name__)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m b2batch.emulators inject",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("system", choices=job_table.SYSTEMS)
    sub = parser.add_subparsers(dest="kind", required=True)
    sub.add_parser("fail-submits").add_argument("count", type=int)
    sub.add_parser("delay").add_argument("seconds", type=float)
    sub.add_parser("submit-delay").add_argument("seconds", type=float)
    lose = sub.add_parser("lose")
    lose.add_argument("job")
    lose.add_argument("--as", dest="as_", choices=("UNKWN", "ZOMBI", "vanish"), default=None)
    hold = sub.add_parser("hold")
    hold.add_argument("job")
    hold.add_argument("--reason", default=None)
    hold.add_argument("--code", type=int, default=34)
    hold.add_argument("--subcode", type=int, default=0)
    sub.add_parser("release").add_argument("job")
    hold_next = sub.add_parser("hold-next")
    hold_next.add_argument("count", type=int, nargs="?", default=1)
    hold_next.add_argument("--reason", default=None)
    hold_next.add_argument("--code", type=int, default=34)
    exit_next = sub.add_parser("exit-next")
    exit_next.add_argument("count", type=int, nargs="?", default=1)
    exit_next.add_argument("--code", type=int, default=1)
    exit_next.add_argument("--reason", default=None)
    sub.add_parser("nodes").add_argument("names")
    bad = sub.add_parser("bad-node")
    bad.add_argument("name")
    bad.add_argument("--clear", action="store_true")
    for kind in ("crash", "status", "clear"):
        sub.add_parser(kind)
    return parser


def _jobs(table: JobTable, token: str) -> list[dict[str, Any]]:
    """The jobs a JOB argument names: a whole cluster / array, or one job."""
    if token in table.jobs:
        return [table.jobs[token]]
    return table.group_jobs(token)


def _lose(table: JobTable, jobs: list[dict[str, Any]], as_: str | None) -> None:
    mode = as_ or ("vanish" if table.store.system == "htcondor" else "UNKWN")
    for job in jobs:
        runner, proc = job.get("runner"), job.get("proc")
        table.after_commit.append(lambda r=runner: slots.kill_group(r, signal.SIGKILL))
        table.after_commit.append(lambda p=proc: slots.kill_group(p, signal.SIGKILL))
        if mode == "vanish":
            table.delete(job["id"])
        else:
            table.update(job, status=job_table.LOST, lost_as=mode, runner=None, proc=None)


def _crash(table: JobTable) -> int:
    count = 0
    for job in table.jobs.values():
        for ref in (job.get("runner"), job.get("proc")):
            if slots.alive(ref):
                slots.kill_group(ref, signal.SIGKILL)
                count += 1
    return count


def apply(system: str, kind: str, args: argparse.Namespace) -> int:
    """Apply one injection to ``system``'s state; prints what it did, returns an exit status."""
    with Store(system).transaction() as table:
        if kind == "status":
            out(json.dumps(table.inject, sort_keys=True))
            return 0
        if kind == "clear":
            for key in list(table.inject):
                table.set_inject(key, None)
        elif kind == "fail-submits":
            table.set_inject("fail_submits", args.count if args.count > 0 else None)
        elif kind == "delay":
            table.set_inject("delay", args.seconds if args.seconds > 0 else None)
        elif kind == "submit-delay":
            table.set_inject("submit_delay", args.seconds if args.seconds > 0 else None)
        elif kind in ("hold-next", "exit-next"):
            if kind == "hold-next" and system != "htcondor":
                err("hold-next exists for htcondor only (LSF: use exit-next)")
                return 2
            fate = (
                {"kind": "hold", "reason": args.reason, "code": args.code}
                if kind == "hold-next"
                else {"kind": "exit", "code": args.code, **({"reason": args.reason} if args.reason else {})}
            )
            table.set_inject("next", list(table.inject.get("next", [])) + [fate] * args.count or None)
        elif kind in ("nodes", "bad-node") and system != "lsf":
            err(f"{kind} exists for lsf only")
            return 2
        elif kind == "nodes":
            table.set_inject("nodes", [n for n in args.names.split(",") if n.strip()] or None)
        elif kind == "bad-node":
            bad = [n for n in table.inject.get("bad_nodes") or [] if n != args.name]
            table.set_inject("bad_nodes", (bad if args.clear else [*bad, args.name]) or None)
        elif kind == "crash":
            out(f"killed {_crash(table)} processes")
            return 0
        else:
            jobs = _jobs(table, args.job)
            if not jobs:
                err(f"no job {args.job} in the {system} emulator")
                return 1
            if kind == "lose":
                _lose(table, jobs, args.as_)
            elif system != "htcondor":
                err(f"{kind} exists for htcondor only")
                return 2
            elif kind == "hold":
                for job in jobs:
                    if job["status"] in (job_table.PENDING, *job_table.ACTIVE):
                        reason = args.reason or htcondor_jobs.memory_hold_reason(job)
                        htcondor_jobs.hold(table, job, reason, args.code, args.subcode)
            elif kind == "release":
                for job in jobs:
                    if job["status"] == job_table.HELD:
                        htcondor_jobs.release(table, job, current_user())
        slots.maintain(table)
    out(f"{system}: {kind} applied")
    return 0


def main(argv: list[str]) -> int:
    """Entry point of ``inject``."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    return apply(args.system, args.kind, args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
