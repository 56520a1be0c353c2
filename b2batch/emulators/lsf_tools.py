"""Emulated LSF tools: ``bsub``, ``bjobs``, ``bkill``.

``bsub`` takes the command from the rest of argv (joined with spaces and run by ``/bin/sh -c``, like
LSF) or a script on stdin, honouring ``#BSUB`` lines (command-line options win). Arrays
(``-J "name[1-10%2]"``) become elements ``123[1]`` ... ``123[10]`` with ``LSB_JOBINDEX`` set.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import os
import re
import shlex
import signal as signals
import sys
import time
from collections.abc import Callable
from typing import Any

from b2batch.emulators import lsf_jobs, slots, job_table
from b2batch.emulators.common import err, hostname, out, submit_delay, take_next_fate, take_submit_failure
from b2batch.emulators.lsf_jobs import FIELDS, HOOKS, ArraySpecError, field_name, parse_array
from b2batch.emulators.job_table import JobTable, Store

logger = logging.getLogger(__name__)

__all__ = ["HOOKS", "bjobs", "bkill", "bsub"]

SYSTEM = "lsf"
DEFAULT_QUEUE = "normal"
SUBMIT_FAILURE = "Failed in an LSF library call: Slave LIM configuration is not ready yet. Job not submitted."
ERROR_EXIT = 255
_WITH_ARG = frozenset(
    [
        "-J",
        "-o",
        "-oo",
        "-e",
        "-eo",
        "-q",
        "-n",
        "-R",
        "-W",
        "-M",
        "-cwd",
        "-env",
        "-i",
        "-P",
        "-G",
        "-app",
        "-u",
        "-m",
        "-sp",
        "-g",
        "-We",
        "-c",
        "-F",
        "-D",
        "-S",
        "-v",
        "-L",
        "-Lp",
        "-outdir",
        "-E",
        "-Ep",
        "-sla",
        "-U",
        "-Jd",
        "-C",
        "-k",
        "-b",
        "-t",
        "-ext",
    ]
)
_FLAGS = frozenset(("-B", "-N", "-r", "-rn", "-x", "-ul", "-hl"))
_NOT_EMULATED = frozenset(("-w", "-K", "-I", "-Ip", "-Is", "-IS", "-ISp", "-ISs", "-IX", "-H", "-tty"))


class BsubError(ValueError):
    """A bsub invocation LSF would reject; ``str()`` is the message."""


def _parse_options(args: list[str], allow_command: bool = True) -> tuple[dict[str, str], list[str]]:
    options: dict[str, str] = {}
    rest = list(args)
    while rest and rest[0].startswith("-"):
        arg = rest.pop(0)
        if arg in _NOT_EMULATED:
            raise BsubError(f"bsub: option {arg} is not emulated by b2batch. Job not submitted.")
        if arg in _FLAGS:
            options[arg] = ""
        elif arg in _WITH_ARG:
            if not rest:
                raise BsubError(f"bsub: option requires an argument -- {arg[1:]}. Job not submitted.")
            options[arg] = rest.pop(0)
        else:
            raise BsubError(f"bsub: illegal option -- {arg[1:]}. Job not submitted.")
    if rest and not allow_command:
        raise BsubError(f"bsub: unexpected argument {rest[0]!r} in #BSUB line. Job not submitted.")
    return options, rest


def _directives(script: str) -> dict[str, str]:
    options: dict[str, str] = {}
    for line in script.splitlines():
        stripped = line.strip()
        if stripped.startswith("#BSUB"):
            options.update(_parse_options(shlex.split(stripped[5:], comments=False), allow_command=False)[0])
    return options


def _env(spec: str, submit_env: dict[str, str]) -> dict[str, str]:
    """``-env "all"`` (default), ``"none"``, ``"all, ~VAR, VAR=value"``, ``"VAR, VAR=value"``."""
    items = [item.strip() for item in spec.split(",") if item.strip()] if spec else ["all"]
    env: dict[str, str] = {}
    if items[0].lower() == "all" or all(i.startswith("~") for i in items if i.lower() != "none"):
        env = dict(submit_env) if items[0].lower() != "none" else {}
    for item in items:
        if item.lower() in ("all", "none"):
            continue
        if item.startswith("~"):
            env.pop(item[1:], None)
        elif "=" in item:
            name, value = item.split("=", 1)
            env[name] = value
        elif item in submit_env:
            env[item] = submit_env[item]
    return env


def _runlimit(value: str) -> float:
    match = re.fullmatch(r"(?:(\d+):)?(\d+)(?:/\S+)?", value.strip())
    if not match:
        raise BsubError(f"{value}: Bad RUNLIMIT specification. Job not submitted.")
    return (int(match.group(1) or 0) * 60 + int(match.group(2))) * 60.0


def _file(pattern: str | None, job_id: int, index: int, cwd: str, suffix: str) -> str | None:
    if not pattern:
        return None
    path = pattern.replace("%J", str(job_id)).replace("%I", str(index))
    path = os.path.join(cwd, os.path.expanduser(path))
    if pattern.endswith("/") or os.path.isdir(path):
        path = os.path.join(path, f"{job_id}.{suffix}")
    return os.path.normpath(path)


def bsub(argv: list[str]) -> int:
    """``bsub [options] command [args]`` or ``bsub [options] < script``."""
    try:
        options, command = _parse_options(argv)
        script = None
        if not command:
            script = sys.stdin.read()
            if not script.strip():
                raise BsubError("No command is specified. Job not submitted.")
            options = {**_directives(script), **options}
        elif len(command) == 1 and os.path.isfile(command[0]):
            with open(command[0], errors="replace") as handle:
                options = {**_directives(handle.read()), **options}
        return _submit(options, command, script)
    except BsubError as exc:
        err(str(exc))
        return ERROR_EXIT


def _submit(options: dict[str, str], command: list[str], script: str | None) -> int:
    submit_env, submit_cwd = dict(os.environ), os.getcwd()
    try:
        name, indices, limit = parse_array(options.get("-J", ""))
    except ArraySpecError:
        raise BsubError("Bad job name. Job not submitted.") from None
    cpus = int(re.split(r"[,\s]", options.get("-n", "1"))[0] or 1)
    walltime = _runlimit(options["-W"]) if "-W" in options else None
    queue = options.get("-q", DEFAULT_QUEUE)
    with Store(SYSTEM).transaction() as table:
        if take_submit_failure(table):
            err(SUBMIT_FAILURE)
            return ERROR_EXIT
        job_id = table.next_group_id()
        group = str(job_id)
        argv, text = _command(table, group, command, script)
        specs: dict[str, dict[str, Any]] = {}
        for index in indices or [0]:
            element = f"{job_id}[{index}]" if indices else group
            job_name = f"{name}[{index}]" if indices else (name or text)
            spec = _element_spec(options, submit_env, submit_cwd, job_id, index, cpus, queue, job_name, element)
            specs[element] = {**spec, "argv": argv, "walltime": walltime}
            attrs = lsf_jobs.new_attrs(job_name, queue, spec["cwd"], text, index)
            attrs.update({"output": spec["stdout"], "error": spec["stderr"], "resreq": options.get("-R"),
                          "memlimit": options.get("-M"), "project": options.get("-P"),
                          "runlimit": f"{walltime / 60:.1f}" if walltime else None})
            if limit:
                attrs["_array_limit"] = limit
            fate = take_next_fate(table)
            if fate:
                attrs["_fate"] = fate
            table.add(job_table.new_job(element, group, cpus, table.now, attrs))
        table.store.write_specs(group, specs)
        slots.maintain(table, HOOKS)
        delay = submit_delay(table)
    time.sleep(delay)
    where = f"queue <{queue}>" if "-q" in options else f"default queue <{queue}>"
    out(f"Job <{job_id}> is submitted to {where}.")
    return 0


def _command(table: Any, group: str, command: list[str], script: str | None) -> tuple[list[str], str]:
    """What the job runs (a script from stdin is kept in the store) and its command text as bjobs shows it."""
    if script is None:
        text = " ".join(command)
        return ["/bin/sh", "-c", text], text
    path = table.store.specs_dir / f"{group}.script"
    path.write_text(script)
    path.chmod(0o755)
    argv = [str(path)] if script.startswith("#!") else ["/bin/sh", str(path)]
    return argv, next((ln for ln in script.splitlines() if ln.strip() and not ln.startswith("#")), "STDIN")


def _element_spec(options: dict[str, str], submit_env: dict[str, str], submit_cwd: str, job_id: int, index: int,
                  cpus: int, queue: str, job_name: str, element: str) -> dict[str, Any]:
    """How one job (array element) runs: its folder, files, stdin and environment (LSF's LSB_* variables)."""
    group = str(job_id)
    cwd = os.path.normpath(
        os.path.join(submit_cwd, options.get("-cwd", ".").replace("%J", group).replace("%I", str(index))))
    stdout = _file(options.get("-oo") or options.get("-o"), job_id, index, cwd, "out")
    stderr = _file(options.get("-eo") or options.get("-e"), job_id, index, cwd, "err") or stdout
    env = _env(options.get("-env", ""), submit_env)
    env.update({"LSB_JOBID": group, "LSB_JOBINDEX": str(index), "LSB_JOBNAME": job_name, "LSB_QUEUE": queue,
                "LSB_HOSTS": " ".join([hostname()] * cpus), "LSB_MCPU_HOSTS": f"{hostname()} {cpus}",
                "LSB_DJOB_NUMPROC": str(cpus), "LSB_MAX_NUM_PROCESSORS": str(cpus), "LS_SUBCWD": cwd,
                "LSB_SUB_HOST": hostname(), "LSB_BATCH_JID": element, "LSB_OUTPUTFILE": stdout or "",
                "LSB_ERRORFILE": stderr or ""})
    return {"cwd": cwd, "env": env, "stdin": options.get("-i"), "stdout": stdout, "stderr": stderr,
            "append_stdout": "-oo" not in options, "append_stderr": "-eo" not in options}


_ID = re.compile(r"^(\d+)(?:\[(\d+)(?:-(\d+))?\])?$")


def _select(table: JobTable, jobs: list[dict[str, Any]], token: str) -> list[dict[str, Any]] | None:
    match = _ID.match(token)
    if not match:
        return None
    group, first, last = match.group(1), match.group(2), match.group(3)
    chosen = [job for job in jobs if job["group"] == group]
    if first is not None:
        low, high = int(first), int(last or first)
        chosen = [job for job in chosen if low <= int(job["attrs"].get("index", 0)) <= high and "[" in job["id"]]
    return chosen


def _parse_ids(argv: list[str], with_arg: tuple[str, ...] = ()) -> tuple[dict[str, str], list[str]]:
    """Options (``-x value`` for those listed) and job id tokens of bjobs/bkill."""
    options: dict[str, str] = {}
    ids: list[str] = []
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg in ("-o", "-J", "-q", "-u", "-m", "-P", "-g", "-G", "-app", "-sla", "-Lp") + with_arg:
            options[arg] = args.pop(0) if args else ""
        elif arg.startswith("-"):
            options[arg] = ""
        else:
            ids.append(arg)
    return options, ids


def _fields(spec: str | None) -> tuple[list[str], str | None]:
    if not spec:
        return list(lsf_jobs.DEFAULT_FIELDS), None
    delimiter = None
    found = re.search(r"delimiter=['\"](.)['\"]", spec)
    if found:
        delimiter = found.group(1)
        spec = spec[: found.start()] + spec[found.end() :]
    return [field_name(item.split(":")[0]) for item in spec.split()], delimiter


def bjobs(argv: list[str]) -> int:
    """``bjobs [-a|-d|-r|-p] [-J name] [-q queue] [-o "fields" [-json]] [-noheader] [ids]``."""
    options, ids = _parse_ids(argv)
    try:
        fields, delimiter = _fields(options.get("-o"))
    except KeyError as exc:
        err(f"{exc.args[0]}: Illegal field name. Job information is not displayed.")
        return ERROR_EXIT
    with Store(SYSTEM).transaction() as table:
        slots.maintain(table, HOOKS)
        now, jobs = table.now, table.view()
    missing: list[str] = []
    if ids:
        selected: list[dict[str, Any]] = []
        for token in ids:
            chosen = _select(table, jobs, token)
            if not chosen:
                missing.append(token)
            selected.extend(job for job in chosen or [] if job not in selected)
    else:
        finished = {"DONE", "EXIT"}
        if "-a" in options:
            selected = list(jobs)
        elif "-d" in options:
            selected = [j for j in jobs if lsf_jobs.stat(j) in finished]
        else:
            selected = [j for j in jobs if lsf_jobs.stat(j) not in finished]
    if "-r" in options:
        selected = [j for j in selected if lsf_jobs.stat(j) == "RUN"]
    if "-p" in options:
        selected = [j for j in selected if lsf_jobs.stat(j) == "PEND"]
    if options.get("-J"):
        pattern = options["-J"]
        selected = [
            j
            for j in selected
            if fnmatch.fnmatchcase(j["attrs"]["name"], pattern)
            or fnmatch.fnmatchcase(re.sub(r"\[\d+\]$", "", j["attrs"]["name"]), pattern)
        ]
        if not selected and not ids:
            missing.append(pattern)
    if options.get("-q"):
        selected = [j for j in selected if j["attrs"]["queue"] == options["-q"]]
    rows = [{name: FIELDS[name](job, now) for name in fields} for job in selected]
    if "-json" in options:
        records: list[dict[str, str]] = [{name.upper(): value for name, value in row.items()} for row in rows]
        records += [{"JOBID": token, "ERROR": f"Job <{token}> is not found"} for token in missing]
        document = {"COMMAND": "bjobs", "JOBS": len(records), "RECORDS": records}
        sys.stdout.write(json.dumps(document, indent=2, separators=(",", ":")) + "\n")
        return 0  # unknown jobs are ERROR records; PSI/J, written against real LSF, relies on exit 0 here
    for token in missing:
        err(f"Job <{token}> is not found")
    if not rows:
        if not missing:
            err("No job found" if "-a" in options or "-d" in options else "No unfinished job found")
        return ERROR_EXIT
    _print_table(fields, rows, delimiter, header="-noheader" not in options)
    return ERROR_EXIT if missing else 0


def _print_table(fields: list[str], rows: list[dict[str, str]], delimiter: str | None, header: bool) -> None:
    table = [[field.upper() for field in fields]] if header else []
    table += [[row[field] or "-" for field in fields] for row in rows]
    if delimiter is not None:
        for line in table:
            out(delimiter.join(line))
        return
    widths = [max(len(line[i]) for line in table) for i in range(len(fields))]
    for line in table:
        out(" ".join(value.ljust(width) for value, width in zip(line, widths)).rstrip())


def _signal(name: str) -> int:
    name = name.upper()
    if name.isdigit():
        return int(name)
    return int(getattr(signals, name if name.startswith("SIG") else "SIG" + name))


def bkill(argv: list[str]) -> int:
    """``bkill [-s SIG] [-J name] [-q queue] ids...`` (``0`` means all your jobs)."""
    options, ids = _parse_ids(argv, with_arg=("-s",))
    try:
        sig = _signal(options["-s"]) if "-s" in options else None
    except (AttributeError, ValueError):
        err(f"bkill: Illegal signal value {options['-s']!r}")
        return ERROR_EXIT
    terminating = sig is None or sig in (signals.SIGKILL, signals.SIGTERM, signals.SIGINT)
    status = 0
    with Store(SYSTEM).transaction() as table:
        jobs = list(table.jobs.values())
        targets: list[tuple[str, list[dict[str, Any]]]] = []
        if "0" in ids:
            targets += [(job["id"], [job]) for job in jobs if lsf_jobs.stat(job) not in ("DONE", "EXIT")]
        if options.get("-J"):
            named = [
                j
                for j in jobs
                if fnmatch.fnmatchcase(re.sub(r"\[\d+\]$", "", j["attrs"]["name"]), options["-J"])
                or fnmatch.fnmatchcase(j["attrs"]["name"], options["-J"])
            ]
            targets += [(job["id"], [job]) for job in named]
            if not named:
                err(f"Job <{options['-J']}>: No matching job found")
                status = ERROR_EXIT
        targets += [(token, _select(table, jobs, token) or []) for token in ids if token != "0"]
        for token, chosen in targets:
            if not chosen:
                err(f"Job <{token}>: No matching job found")
                status = ERROR_EXIT
                continue
            live = [job for job in chosen if lsf_jobs.stat(job) not in ("DONE", "EXIT")]
            if not live:
                err(f"Job <{token}>: Job has already finished")
                status = ERROR_EXIT
                continue
            for job in live:
                if not terminating:
                    proc = job.get("proc")
                    table.after_commit.append(lambda ref=proc, s=sig: slots.kill_group(ref, s))
                    continue
                was_active = job["status"] in job_table.ACTIVE
                table.update(job, status=job_table.REMOVED, end_time=table.now)
                if was_active:
                    slots.stop(table, job)
            out(f"Job <{token}> is being {'terminated' if terminating else 'signaled'}")
        slots.maintain(table, HOOKS)
    return status


COMMANDS: dict[str, Callable[[list[str]], int]] = {"bsub": bsub, "bjobs": bjobs, "bkill": bkill}
