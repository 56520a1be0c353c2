"""Emulated HTCondor tools: ``condor_submit``, ``condor_q``, ``condor_history``, ``condor_rm``.

Each ``*_main(argv) -> int`` takes the arguments after the tool name and prints what the real tool
prints. Jobs really run (see :mod:`b2batch.emulators.slots`); completed and removed jobs leave
the queue for the history.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from b2batch.emulators import eventlog, htcondor_jobs, slots, job_table, submit_file
from b2batch.emulators.classad import ClassAdError, autoformat, compile_constraint, dumps_ads, evaluate, unparse
from b2batch.emulators.common import (current_user, err, hostname, out, submit_delay, take_next_fate,
                                      take_submit_failure)
from b2batch.emulators.htcondor_jobs import HOOKS, job_ad
from b2batch.emulators.job_table import Store
from b2batch.emulators.submit_file import SubmitError

logger = logging.getLogger(__name__)

__all__ = ["HOOKS", "condor_history", "condor_q", "condor_rm", "condor_submit"]

SYSTEM = "htcondor"
SUBMIT_FAILURE = (
    "\nERROR: Failed to connect to local queue manager\nAUTHENTICATE:1003:Failed to authenticate with any method\n"
)
_JOB_ID = re.compile(r"^(\d+)(?:\.(\d+))?$")
_ST = {1: "I", 2: "R", 3: "X", 4: "C", 5: "H", 6: ">", 7: "S"}


def condor_submit(argv: list[str]) -> int:
    """``condor_submit [-terse] [-batch-name N] [-append CMD]... [name=value]... [FILE|-]``."""
    terse, batch_name, appends, assigns, path = False, None, [], {}, None
    where: dict[str, str] = {}
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg in ("-terse", "-t"):
            terse = True
        elif arg in ("-batch-name", "-batch_name"):
            batch_name = args.pop(0) if args else None
        elif arg in ("-append", "-a"):
            appends.append(args.pop(0) if args else "")
        elif arg in ("-verbose", "-v", "-disable", "-debug", "-unused"):
            pass
        elif arg in ("-name", "-pool", "-remote"):
            where[arg] = args.pop(0) if args else ""
        elif "=" in arg and not arg.startswith("-"):
            key, value = arg.split("=", 1)
            assigns[key.strip()] = value.strip()
        elif arg == "-" or not arg.startswith("-"):
            path = arg
        else:
            err(f"ERROR: Unknown option {arg}")
            return 1
    schedd = where.get("-name", where.get("-remote"))
    if unlocated(schedd, where.get("-pool")) is not None:
        err(f"\nERROR: Can't find address of schedd {schedd}" if schedd else "\nERROR: Can't find address of local schedd")
        return 1
    if path is None or path == "-":
        text = sys.stdin.read()
    else:
        try:
            text = Path(path).read_text()
        except OSError as exc:
            err(f'ERROR: Failed to open command file "{path}" ({exc.strerror})')
            return 1
    if appends:  # -append lines go before the first queue statement... and are also in force for later ones
        lines = text.splitlines()
        first_queue = next(
            (i for i, line in enumerate(lines) if re.match(r"\s*queue\b", line, re.IGNORECASE)), len(lines)
        )
        text = "\n".join(lines[:first_queue] + appends + lines[first_queue:])
    try:
        description = submit_file.parse(text)
    except SubmitError as exc:
        err(f"\n{exc}")
        return 1
    return _submit(description, assigns, batch_name, terse)


def _submit(
    description: submit_file.SubmitDescription, assigns: dict[str, str], batch_name: str | None, terse: bool
) -> int:
    cwd, now, env = os.getcwd(), time.time(), dict(os.environ)
    with Store(SYSTEM).transaction() as table:
        if take_submit_failure(table):
            sys.stderr.write(SUBMIT_FAILURE)
            return 1
        cluster = int(table.data["next_id"])
        try:
            procs = description.procs(cluster, assigns)
            built = [htcondor_jobs.build_proc(proc, cluster, cwd, now, env, batch_name) for proc in procs]
            if not built:
                raise SubmitError("ERROR: no jobs queued")
        except (SubmitError, ValueError) as exc:
            err(f"\n{exc}")
            return 1
        table.next_group_id()
        table.store.write_specs(str(cluster), {f"{cluster}.{ad['ProcId']}": spec for ad, spec, _ in built})
        for ad, _, cpus in built:
            fate = take_next_fate(table)
            if fate:
                ad["_fate"] = fate
            job = job_table.new_job(f"{cluster}.{ad['ProcId']}", str(cluster), cpus, now, ad)
            table.add(job)
            eventlog.submitted(ad.get("UserLog"), cluster, ad["ProcId"], now, htcondor_jobs.address())
        slots.maintain(table, HOOKS)
        delay = submit_delay(table)
    time.sleep(delay)
    count = len(built)
    if terse:
        out(f"{cluster}.0 - {cluster}.{count - 1}")
    else:
        out("Submitting job(s)" + "." * count)
        out(f"{count} job(s) submitted to cluster {cluster}.")
    return 0


@dataclass
class Query:
    """Parsed options of condor_q / condor_history / condor_rm."""

    ids: list[tuple[int, int | None]] = field(default_factory=list)
    owners: list[str] = field(default_factory=list)
    constraints: list[str] = field(default_factory=list)
    attributes: list[str] = field(default_factory=list)
    af: list[str] | None = None
    af_flags: str = ""
    json: bool = False
    long: bool = False
    limit: int | None = None
    forwards: bool = False
    all: bool = False
    name: str | None = None
    pool: str | None = None

    def matcher(self) -> Callable[[dict[str, Any]], bool]:
        """A predicate over job ads for the ids/owners (any) and constraints (all)."""
        checks = [compile_constraint(text) for text in self.constraints]
        ids, owners = self.ids, self.owners

        def match(ad: dict[str, Any]) -> bool:
            if ids or owners:
                by_id = any(ad["ClusterId"] == c and (p is None or ad["ProcId"] == p) for c, p in ids)
                if not by_id and ad.get("Owner") not in owners:
                    return False
            return all(check(ad) for check in checks)

        return match


def parse_query(argv: list[str], tool: str) -> Query:
    """Parse the options shared by condor_q, condor_history and condor_rm."""
    query = Query()
    args = list(argv)
    while args:
        arg = args.pop(0)
        low = arg.lower()
        if low in ("-json", "-jsonl"):
            query.json = True
        elif low in ("-attributes", "-attrs", "-attr"):
            query.attributes += [a.strip() for a in (args.pop(0) if args else "").split(",") if a.strip()]
        elif low in ("-constraint", "-const"):
            query.constraints.append(args.pop(0) if args else "")
        elif low.startswith(("-af", "-autoformat")):
            query.af_flags = arg.split(":", 1)[1] if ":" in arg else ""
            query.af = []
            while args and not args[0].startswith("-"):
                query.af.append(args.pop(0))
        elif low in ("-long", "-l"):
            query.long = True
        elif low in ("-match", "-limit"):
            query.limit = int(args.pop(0))
        elif low == "-forwards":
            query.forwards = True
        elif low in ("-all", "-allusers"):
            query.all = True
        elif low in ("-name", "-pool"):
            setattr(query, low[1:], args.pop(0) if args else "")
        elif low in ("-submitter", "-userlog", "-file", "-since", "-completedsince"):
            args.pop(0) if args else None
        elif low.startswith("-"):
            pass  # display options without arguments (-nobatch, -wide, -backwards, -totals, ...)
        elif (match := _JOB_ID.match(arg)) is not None:
            query.ids.append((int(match.group(1)), int(match.group(2)) if match.group(2) else None))
        else:
            query.owners.append(arg)
    return query


def _print(query: Query, ads: list[dict[str, Any]], tool: str) -> None:
    if query.af is not None:
        raw, with_id = "r" in query.af_flags, "j" in query.af_flags
        sep = "\t" if "t" in query.af_flags else " "
        for ad in ads:
            values = [autoformat(_lookup(ad, name), raw) for name in query.af]
            if "l" in query.af_flags:
                values = [f"{name} = {value}" for name, value in zip(query.af, values)]
            prefix = [f"{ad['ClusterId']}.{ad['ProcId']}"] if with_id else []
            out(sep.join(prefix + values))
        return
    if query.attributes:
        wanted = {a.lower() for a in query.attributes}
        ads = [{k: v for k, v in ad.items() if k.lower() in wanted} for ad in ads]
    if query.json:
        if ads:
            sys.stdout.write(dumps_ads(ads))
        elif tool == "condor_history":  # HTCondor 25: condor_q prints nothing, condor_history an empty list
            sys.stdout.write("[\n]\n")
        return
    if query.long:
        for ad in ads:
            sys.stdout.write("".join(f"{k} = {unparse(ad[k])}\n" for k in sorted(ad, key=str.lower)) + "\n")
        return
    _print_table(ads, tool)


def _lookup(ad: dict[str, Any], name: str) -> Any:
    """An attribute's value, or the value of an expression over the ad (``-af 'ExitCode == 0'``)."""
    for key, value in ad.items():
        if key.lower() == name.lower():
            return value
    try:
        return evaluate(name, ad)
    except ClassAdError:
        return None


def _print_table(ads: list[dict[str, Any]], tool: str) -> None:
    now = time.time()
    if tool == "condor_q":
        out(f"\n\n-- Schedd: {hostname()} : <127.0.0.1:9618?... @ {time.strftime('%m/%d/%y %H:%M:%S')}")
        out(" ID      OWNER            SUBMITTED     RUN_TIME ST PRI SIZE CMD")
    else:
        out(" ID     OWNER          SUBMITTED   RUN_TIME     ST COMPLETED   CMD")
    counts = {k: 0 for k in (1, 2, 3, 4, 5, 7)}
    for ad in ads:
        counts[ad["JobStatus"]] = counts.get(ad["JobStatus"], 0) + 1
        run = int(
            ad.get("RemoteWallClockTime", 0) if ad["JobStatus"] != 2 else now - ad.get("JobCurrentStartDate", now)
        )
        runtime = f"{run // 86400}+{run % 86400 // 3600:02d}:{run % 3600 // 60:02d}:{run % 60:02d}"
        submitted = time.strftime("%m/%d %H:%M", time.localtime(ad["QDate"]))
        cmd = (os.path.basename(ad["Cmd"]) + " " + ad.get("Arguments", "")).strip()
        job_id = f"{ad['ClusterId']}.{ad['ProcId']}"
        if tool == "condor_q":
            out(f"{job_id:>6}   {ad['Owner']:<14} {submitted}  {runtime} {_ST[ad['JobStatus']]}  0    0.0 {cmd}")
        else:
            done = time.strftime("%m/%d %H:%M", time.localtime(ad["EnteredCurrentStatus"]))
            out(f"{job_id:>6} {ad['Owner']:<14} {submitted} {runtime} {_ST[ad['JobStatus']]}  {done} {cmd}")
    if tool == "condor_q":
        out(
            f"\nTotal for query: {len(ads)} jobs; {counts[4]} completed, {counts[3]} removed, {counts[1]} idle, "
            f"{counts[2]} running, {counts[5]} held, {counts[7]} suspended"
        )


def schedd_names() -> set[str]:
    """The names under which the emulated pool knows its one schedd (``SCHEDD_NAME`` is the host's name)."""
    full = socket.getfqdn()
    return {hostname(), full, socket.gethostname(), "localhost"}


def unlocated(name: str | None, pool: str | None) -> str | None:
    """What ``-name`` / ``-pool`` name that the emulated pool lacks: "schedd", "pool", or None (all found).
    Its collector answers on this host, at any port."""
    if pool is not None and pool.rsplit(":", 1)[0] not in schedd_names() | {"127.0.0.1"}:
        return "pool"
    if name is not None and name.split("@")[-1] not in schedd_names():
        return "schedd"
    return None


def _select(argv: list[str], tool: str, in_history: bool) -> tuple[Query, list[dict[str, Any]]] | int:
    try:
        query = parse_query(argv, tool)
        match = query.matcher()
    except (ClassAdError, ValueError, IndexError) as exc:
        err(f"{tool}: error: {exc}")
        return 1
    missing = unlocated(query.name, query.pool)
    if missing is not None:
        err("Error: Collector has no record of schedd/submitter" if missing == "schedd" else
            f"Error: Couldn't contact the condor_collector on {query.pool}.")
        return 1
    with Store(SYSTEM).transaction() as table:
        slots.maintain(table, HOOKS)
        now = table.now
        jobs = table.view()
    ads = [job_ad(job, now) for job in jobs]
    ads = [ad for ad in ads if (ad["JobStatus"] in (3, 4)) == in_history and match(ad)]
    return query, ads


def condor_q(argv: list[str]) -> int:
    """``condor_q [-json] [-attributes A,B] [-constraint E]... [-af[:jlrt] A B] [ids|owner]``."""
    selected = _select(argv, "condor_q", in_history=False)
    if isinstance(selected, int):
        return selected
    query, ads = selected
    _print(query, ads, "condor_q")
    return 0


def condor_history(argv: list[str]) -> int:
    """``condor_history`` with condor_q's options plus ``-match N``/``-limit N``; newest first."""
    selected = _select(argv, "condor_history", in_history=True)
    if isinstance(selected, int):
        return selected
    query, ads = selected
    ads.sort(key=lambda ad: (ad["EnteredCurrentStatus"], ad["ClusterId"], ad["ProcId"]), reverse=not query.forwards)
    if query.limit is not None:
        ads = ads[: query.limit]
    _print(query, ads, "condor_history")
    return 0


def condor_rm(argv: list[str]) -> int:
    """``condor_rm CLUSTER | CLUSTER.PROC | OWNER | -constraint EXPR | -all``: kill and remove jobs."""
    try:
        query = parse_query(argv, "condor_rm")
        checks = [compile_constraint(text) for text in query.constraints]
    except (ClassAdError, ValueError, IndexError) as exc:
        err(f"condor_rm: error: {exc}")
        return 1
    if unlocated(query.name, query.pool) is not None:
        err(f"Can't find address of schedd {query.name}" if query.name else "Can't find address of local schedd")
        return 1
    if not (query.ids or query.owners or query.constraints or query.all):
        err("condor_rm: you must specify a cluster, a job, a user, -constraint or -all")
        return 1
    by, status = current_user(), 0
    with Store(SYSTEM).transaction() as table:
        queued = [job for job in table.jobs.values() if job["status"] not in (job_table.EXITED, job_table.REMOVED)]

        def remove(jobs: list[dict[str, Any]], done: str, failed: str) -> int:
            for job in jobs:
                htcondor_jobs.remove(table, job, by)
            (out if jobs else err)(done if jobs else failed)
            return 0 if jobs else 1

        for cluster, proc in query.ids:
            jobs = [j for j in queued if j["attrs"]["ClusterId"] == cluster and proc in (None, j["attrs"]["ProcId"])]
            if proc is None:
                status |= remove(
                    jobs,
                    f"All jobs in cluster {cluster} have been marked for removal",
                    f"Couldn't find/remove all jobs in cluster {cluster}",
                )
            else:
                status |= remove(jobs, f"Job {cluster}.{proc} marked for removal", f"Job {cluster}.{proc} not found")
        for owner in query.owners:
            jobs = [j for j in queued if j["attrs"].get("Owner") == owner and j["status"] != job_table.REMOVED]
            status |= remove(
                jobs,
                f'All jobs of user "{owner}" have been marked for removal',
                f"Couldn't find/remove all of user {owner}'s job(s)",
            )
        if query.constraints:
            text = (
                " && ".join(f"({c})" for c in query.constraints) if len(query.constraints) > 1 else query.constraints[0]
            )
            jobs = [j for j in queued if j["status"] != job_table.REMOVED and all(c(job_ad(j, table.now)) for c in checks)]
            status |= remove(
                jobs,
                f"All jobs matching constraint ({text}) have been marked for removal",
                f"Couldn't find/remove all jobs matching constraint ({text})",
            )
        if query.all:
            jobs = [j for j in queued if j["status"] != job_table.REMOVED]
            status |= remove(jobs, "All jobs have been marked for removal", "Couldn't find/remove all jobs")
        slots.maintain(table, HOOKS)
    return status


COMMANDS: dict[str, Callable[[list[str]], int]] = {
    "condor_submit": condor_submit,
    "condor_q": condor_q,
    "condor_history": condor_history,
    "condor_rm": condor_rm,
}
