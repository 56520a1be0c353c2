"""The accounting figures that come after the run: its report completed once the batch system has them.

A run's pilot and bundle jobs end with it, and the scheduler's accounting has them a second or more later
(slurmdbd, SGE's accounting file flush). The run does not wait for them: the end summary does not use them (its
efficiency lines are the tasks'), only the report's ``worker_jobs`` entries do. The run hands them over
(:attr:`b2batch.engine.record.RunRecord.accounting_pending`, the report's ``accounting_pending``), and when it has
written its report starts this module as a process of its own
(:func:`b2batch.display.report.complete_accounting_later`).

The process asks the batch system's accounting command (:mod:`b2batch.systems.accounting`) for those jobs,
first after :data:`FIRST` seconds, then twice as long each time up to :data:`LONGEST`, for up to :data:`PATIENCE`
seconds; every answer goes into the report at once (:func:`b2batch.display.jsonfile.rewrite_head`: the file is
replaced whole, a large report's jobs copied undecoded). Jobs it found leave ``accounting_pending``; when the
command fails, or the patience runs out, what is left stays there with ``given_up`` saying why. The report's
other keys, its jobs and its HTML page (which shows no pilot's figures) stay as they are.

    python -m b2batch.command.late_accounting REPORT.json
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from b2batch.display.jsonfile import read_head, rewrite_head
from b2batch.engine.usage import Usage
from b2batch.systems import accounting
from b2batch.systems.collect import ask

#: Seconds before the first question, the longest pause between two, and how long to keep asking.
FIRST = 1.0
LONGEST = 8.0
PATIENCE = 60.0
#: Seconds one accounting command may take.
COMMAND_TIMEOUT = 60.0


def complete(report: Path, patience: float = PATIENCE, first: float = FIRST, longest: float = LONGEST,
             sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic) -> None:
    """Ask for the accounting figures ``report`` awaits until each batch system answered for its jobs, failed,
    or ``patience`` seconds passed, writing each answer into the report."""
    began, pause = clock(), first
    while True:
        sleep(pause)
        pause = min(2 * pause, longest)
        pending = _open(read_head(report, "jobs"))
        if not pending:
            return
        late = clock() - began > patience
        answers = {system: _ask(system, entry) for system, entry in pending.items()}
        left: dict[str, Any] = {}

        def note(head: dict[str, Any]) -> None:
            _note(head, answers, late, patience)
            left.update(_open(head))

        rewrite_head(report, "jobs", note)
        if late or not left:
            return


def _open(head: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The batch systems whose jobs a report's ``head`` still awaits (not given up), with their entries."""
    found = head.get("accounting_pending") or {}
    return {system: entry for system, entry in found.items() if entry.get("jobs") and not entry.get("given_up")}


def _ask(system: str, entry: dict[str, Any]) -> dict[str, Usage] | str:
    """The figures the accounting has of the entry's jobs, by job id, or why it could not tell."""
    if system not in accounting.BY_SYSTEM:
        return f"b2batch reads no accounting of {system}"
    build, parse = accounting.BY_SYSTEM[system]
    return ask(build(sorted(entry["jobs"]), str(entry.get("tag") or "")), parse, COMMAND_TIMEOUT)


def _note(head: dict[str, Any], answers: dict[str, dict[str, Usage] | str], late: bool, patience: float) -> None:
    """Write ``answers`` into the report's ``head``: figures into the worker jobs' entries, found jobs out of
    ``accounting_pending``, a failed command or the end of the patience into its ``given_up``."""
    pending = head.get("accounting_pending") or {}
    workers = {(str(w.get("key")), str(w.get("job_id"))): w for w in head.get("worker_jobs") or []}
    for system, answer in answers.items():
        entry = pending.get(system)
        if not entry:
            continue
        if isinstance(answer, str):
            entry["given_up"] = answer
            continue
        for job_id, usage in answer.items():
            key = entry["jobs"].pop(job_id, None)
            worker = workers.get((str(key), job_id))
            if worker is None:
                continue
            worker["usage"] = usage.merged(Usage.of(worker.get("usage"))).as_dict()
            head.setdefault("accounting", {}).setdefault(system, accounting.BY_SYSTEM[system][0]([job_id], "")[0])
        if entry["jobs"] and late:
            entry["given_up"] = f"no record of {len(entry['jobs'])} job(s) after {patience:g} s"
        if not entry["jobs"]:
            del pending[system]


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    report = Path(argv[0])
    try:
        complete(report)
    except FileNotFoundError:  # the run's folder was removed meanwhile: nothing to complete
        return 0
    except Exception as e:  # noqa: BLE001 - say in the report why it stopped, if it can
        why = f"stopped: {e!r}"

        def give_up(head: dict[str, Any]) -> None:
            for entry in (head.get("accounting_pending") or {}).values():
                entry.setdefault("given_up", why)

        try:
            rewrite_head(report, "jobs", give_up)
        except Exception:  # noqa: BLE001 - the report is gone or unwritable: nothing more to do
            pass
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
