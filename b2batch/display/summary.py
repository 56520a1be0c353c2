"""The end summary of a run: what became of its tasks per family and batch system, the failures with their logs,
the resubmissions and policies, the job shapes, the efficiency lines, the scheduler commands, the files written
and the result, as :class:`b2batch.display.report.RunReport` prints it on stderr."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from b2batch.display.efficiency import efficiency, summary_lines

if TYPE_CHECKING:
    from b2batch.display.report import RunReport, TaskOutcome

#: The columns of the summary: what became of each task in this run.
OUTCOMES = ("done", "failed", "not run", "missing", "unfinished", "already complete")

#: The summary's heading of each policy's entries (a policy not listed here is headed by its name).
POLICY_TITLES = {
    "poison_tasks": "Not submitted: failed max_task_failures times in earlier runs (--retry-failed or "
                    "`b2batch retry` submits them again)",
    "acceptance": "Ran without some requirements (acceptance)",
    "checkpoints": "Checkpointed before the batch system's limit and requeued",
    "escalations": "Escalated: killed for memory or time, submitted again asking for more (retry_memory_factor, "
                   "retry_time_factor)",
    "node_failures": "Nodes that failed jobs for node reasons (max_node_failures)",
}


def summary_text(report: RunReport, outcomes: list[TaskOutcome]) -> str:
    """The end summary: counts per family and system, the failures with their logs, the
    resubmissions, the time taken, the files written, the exit status."""
    lines = ["", "===== b2batch summary =====", ""]
    rows: dict[tuple[str, str], Counter[str]] = {}
    for o in outcomes:
        rows.setdefault((o.family, o.system), Counter())[o.outcome] += 1
    mode = {"batch": "as batch jobs", "test": "in test mode", "local": "in this process",
            "local-jobs": "as local jobs (no --batch)"}[report.mode]
    ran = sum(1 for o in outcomes if o.outcome != "already complete")
    lines.append(f"{ran} task(s) {mode} in {_seconds(report.ended_at - report.started_at)}"
                 + (f" (stopped by {report.error})" if report.interrupted else "") + ":")
    columns = [c for c in OUTCOMES if any(row[c] for row in rows.values())]
    table = [["task family", "where", *columns]]
    for (family, system), row in sorted(rows.items()):
        table.append([family, system, *(str(row[c]) for c in columns)])
    lines += ["  " + line for line in _align(table)] if rows else ["  no tasks"]

    failed = [o for o in outcomes if o.outcome in ("failed", "missing")]
    if failed:
        lines += ["", f"Failed ({len(failed)}):"]
        for o in failed:
            lines += _failure(o)
    resubmitted = [o for o in outcomes if o.record is not None and o.record.resubmissions]
    if resubmitted:
        lines += ["", f"Resubmitted ({len(resubmitted)}):"]
        for o in resubmitted:
            assert o.record is not None
            lines.append(f"  {o.name} on {o.system}: jobs {', '.join(o.record.job_ids)}")
            lines += [f"    {i}. {reason.splitlines()[0] if reason else '(no reason given)'}"
                      for i, reason in enumerate(o.record.resubmissions, 1)]
    for policy, entries in report.policies().items():
        lines += ["", f"{POLICY_TITLES.get(policy, policy)} ({len(entries)}):"]
        lines += [f"  {entry['text']}" for entry in entries[:20]]
        if len(entries) > 20:
            lines.append(f"  ... and {len(entries) - 20} more (see the report)")
    not_run = [o for o in outcomes if o.outcome in ("not run", "unfinished")]
    if not_run:
        lines += ["", f"Not run or unfinished ({len(not_run)}):"]
        lines += [f"  {o.name}: {o.reason}" if o.reason else f"  {o.name}" for o in not_run[:20]]
        if len(not_run) > 20:
            lines.append(f"  ... and {len(not_run) - 20} more")
    shapes = report.run.shapes
    if shapes:
        lines += ["", "Job shapes (job_shape auto: docs/job-shapes.md):"]
        lines += [f"  {family}: {shape_line(entry)}" for family, entry in sorted(shapes.items())]
    lines += summary_lines(efficiency(report.run.jobs.values()), report.run.accounting)
    calls = report.run.scheduler_calls
    if calls:
        lines += ["", "Scheduler commands: " + ", ".join(f"{calls[p]} {p}" for p in sorted(calls)) + "."]
    if report.paths:
        lines.append("")
        lines.append(f"Timeline: {report.paths['trace']} (open in https://ui.perfetto.dev or chrome://tracing)")
        lines.append(f"Report:   {report.paths['report']}")
        pending = sum(len(entry["jobs"]) for entry in getattr(report.run, "accounting_pending", {}).values())
        if pending:  # (the run did not wait for them: b2batch.command.late_accounting)
            lines.append(f"          the accounting figures of {pending} pilot or bundle job(s) follow into it "
                         "when the batch system has them")
        if "html" in report.paths:
            lines.append(f"HTML:     {report.paths['html']} (open in a web browser)")
    lines.append("")
    if report.interrupted:
        lines.append(f"Result: stopped by {report.error}.")
    elif report.failed:
        what = f"{len(failed)} task(s) failed" if failed else "luigi could not schedule or run everything"
        ends = "exit status 1" if report.exits_on_failure else "process() returns (exit_on_failure is false)"
        lines.append(f"Result: {what}; {ends}.")
    else:
        lines.append("Result: success; exit status 0.")
    lines += ["===== b2batch summary =====", ""]
    return "\n".join(lines) + "\n"


def shape_line(entry: dict[str, Any]) -> str:
    """One family's job shape in the summary: ``pilots (median 0.4 s per task, 1000 ready: 2 pilot(s))``, and
    where its tasks went when not all went there (e.g. the probes of a family that then got jobs of its own)."""
    line = f"{entry['shape']} ({entry['why']})"
    units = {k: n for k, n in entry.get("units", {}).items() if n}
    if set(units) - {entry["shape"]}:
        names = {"pilots": "in pilots", "bundles": "in bundles", "job_per_task": "in jobs of their own"}
        line += "; tasks " + ", ".join(f"{units[k]} {names[k]}" for k in names if units.get(k))
    return line


def _failure(o: TaskOutcome) -> list[str]:
    """The lines of one failed task: what failed where, why, its logs and the end of its stderr."""
    record = o.record
    if record is None:
        return [f"  {o.name}: {o.reason or 'failed in this process (its error is in the log above)'}"]
    job = f"job {record.job_ids[-1]} on {record.system}" if record.job_ids else f"not submitted to {record.system}"
    if record.carrier:
        job = f"in {record.carrier}"
    lines = [f"  {o.name}: {job}"]
    if not record.job_ids:  # the batch system's answer is the reason: all of it (its stderr says what is wrong)
        lines += [f"    {line}" for line in record.reason.splitlines() if line.strip()][:12]
        return lines  # no job: no logs
    reason = [line for line in record.reason.split("\nstdout: ")[0].splitlines() if line.strip()]
    if reason:
        lines.append(f"    {reason[0]}")
        extra = [line for line in reason[1:] if line.startswith("Batch system:")]
        if len(reason) > 1 and not reason[-1].startswith("Batch system:"):
            extra.append(reason[-1].strip())
        lines += [f"    {line}" for line in extra]
    lines.append(f"    stdout: {record.stdout}")
    lines.append(f"    stderr: {record.stderr}")
    if record.stderr_tail:
        lines.append("    last lines of stderr:")
        lines += [f"      | {line}" for line in record.stderr_tail.splitlines()[-10:]]
    return lines


def _align(table: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    return ["  ".join(cell.ljust(w) if i < 2 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths)))
            .rstrip() for row in table]


def _seconds(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{rest:02d}"
