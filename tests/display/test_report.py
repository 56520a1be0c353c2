"""The end of a run: the summary, the exit status, the timeline (Chrome trace JSON) and the JSON report, with
real runs of ``tests/workflows/experience.py`` (local jobs, and luigi in the steering process)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import luigi

from b2batch.engine import JobRecord
from b2batch.display.trace import attempts, trace
from b2batch.luigi_frontend.outcomes import luigi_sets as luigi_outcome

BATCH = ("--batch", "--batch-system", "local")
TRACE_NAME = re.compile(r"b2batch-run-\d{8}-\d{6}(_\d+)?\.trace\.json")


def summary_of(stderr: str) -> str:
    start = stderr.index("===== b2batch summary =====")
    return stderr[start:]


def written_files(summary: str) -> tuple[Path, Path]:
    trace_path = Path(re.search(r"^Timeline: (\S+)", summary, re.M).group(1))
    report_path = Path(re.search(r"^Report: +(\S+)", summary, re.M).group(1))
    return trace_path, report_path


def check_trace(events: list[dict], jobs_expected: int) -> list[dict]:
    """The trace is what Perfetto reads: every event complete, one ``job`` span per job holding its
    ``queued`` and ``running`` spans exactly; the job spans."""
    for event in events:
        assert {"name", "ph", "pid", "tid"} <= set(event), event
        if event["ph"] == "X":
            assert isinstance(event["ts"], int) and isinstance(event["dur"], int) and event["dur"] >= 0, event
            assert event["ts"] >= 0
    job_spans = [e for e in events if e.get("cat") == "job"]
    assert len(job_spans) == jobs_expected
    for job in job_spans:
        same_row = [e for e in events if e["ph"] == "X" and e["tid"] == job["tid"] and e["pid"] == job["pid"]
                    and job["ts"] <= e["ts"] <= job["ts"] + job["dur"] and e is not job]
        queued = [e for e in same_row if e["cat"] == "queued" and e["ts"] == job["ts"]]
        running = [e for e in same_row if e["cat"] == "running" and e["args"]["job_id"] == job["args"]["job_id"]]
        assert len(queued) == 1 and len(running) == 1, (job, same_row)
        assert queued[0]["ts"] + queued[0]["dur"] == running[0]["ts"]
        assert running[0]["ts"] + running[0]["dur"] == job["ts"] + job["dur"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert all(names[(j["pid"], j["tid"])] == j["name"] for j in job_spans)
    systems = {e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert systems == {j["args"]["system"] for j in job_spans}
    return job_spans


def test_failed_batch_run_is_summarised_exits_1_and_leaves_a_timeline_and_a_report(workflow) -> None:
    flow = workflow("experience.py")
    run = flow.run(*BATCH, "--count", "3", "--fail", "1")
    assert run.returncode == 1, run.stderr
    assert "after process" not in run.stdout  # process() ended the script
    summary = summary_of(run.stderr)
    assert re.search(r"^4 task\(s\) as batch jobs in [\d.]+ s:$", summary, re.M), summary
    assert re.search(r"^  Part +local +2 +1 +0$", summary, re.M), summary
    assert re.search(r"^  Total +local +0 +0 +1$", summary, re.M), summary
    job_id = re.search(r"^  Part\(n=1\): job (\S+) on local$", summary, re.M).group(1)
    logs = flow.folder / "logs" / "n=1" / "Part"
    assert f"    Task Part (n=1) failed: job {job_id} on local exited with code 1." in summary
    assert "    RuntimeError: part 1 is broken" in summary
    assert f"    stdout: {logs / 'stdout'}\n    stderr: {logs / 'stderr'}" in summary
    assert "      | RuntimeError: part 1 is broken" in summary  # the end of stderr
    assert "  Total(): a requirement failed" in summary
    assert summary.rstrip().endswith("Result: 1 task(s) failed; exit status 1.\n===== b2batch summary =====")

    trace_path, report_path = written_files(summary)
    assert trace_path.parent == report_path.parent == flow.folder / "logs"
    assert TRACE_NAME.fullmatch(trace_path.name) and report_path.name == trace_path.name.replace("trace", "report")
    events = json.loads(trace_path.read_text())["traceEvents"]
    spans = check_trace(events, jobs_expected=3)
    failed = [s for s in spans if s["args"]["state"] == "failed"]
    assert [s["name"] for s in failed] == ["Part(n=1)"] and failed[0]["args"]["job_id"] == job_id
    assert failed[0]["args"]["stderr"] == str(logs / "stderr")
    assert sorted(s["name"] for s in spans if s["args"]["state"] == "done") == ["Part(n=0)", "Part(n=2)"]

    report = json.loads(report_path.read_text())
    assert report["exit_status"] == 1 and report["failed"] is True and report["interrupted"] is False
    assert report["mode"] == "batch" and report["luigi_status"] == "FAILED"
    assert report["script"] == str(flow.script) and report["argv"] == ["--count", "3", "--fail", "1"]
    assert {k: report["totals"][k] for k in ("done", "failed", "not run", "jobs")} == \
        {"done": 2, "failed": 1, "not run": 1, "jobs": 3}
    assert report["by_family"] == {"Part": {"local": {"done": 2, "failed": 1}}, "Total": {"local": {"not run": 1}}}
    assert report["started_at"] <= min(j["submitted_at"] for j in report["jobs"])
    assert max(j["ended_at"] for j in report["jobs"]) <= report["ended_at"]
    jobs = {j["task_id"]: j for j in report["jobs"]}
    broken = next(j for j in jobs.values() if j["state"] == "failed")
    assert broken["job_ids"] == [job_id] and "RuntimeError: part 1 is broken" in broken["stderr_tail"]
    assert [h["state"] for h in broken["history"]][-1] == "failed"
    # The trace's times are the report's, in microseconds since the start of the run.
    span = failed[0]
    assert abs(span["ts"] - (broken["submitted_at"] - report["started_at"]) * 1e6) < 1e4
    assert abs(span["ts"] + span["dur"] - (broken["ended_at"] - report["started_at"]) * 1e6) < 1e4
    assert report["other_tasks"] == [{"task_id": "Total__99914b932b", "task": "Total()", "outcome": "not run",
                                      "reason": "a requirement failed"}]


def test_successful_batch_run_exits_0_and_goes_on_after_process(workflow) -> None:
    flow = workflow("experience.py")
    run = flow.run(*BATCH, "--count", "2")
    assert run.returncode == 0, run.stderr
    assert "after process: SUCCESS" in run.stdout
    summary = summary_of(run.stderr)
    assert re.search(r"^  Part +local +2$", summary, re.M) and re.search(r"^  Total +local +1$", summary, re.M)
    assert "Failed" not in summary and "Result: success; exit status 0." in summary
    trace_path, report_path = written_files(summary)
    check_trace(json.loads(trace_path.read_text())["traceEvents"], jobs_expected=3)
    report = json.loads(report_path.read_text())
    assert report["exit_status"] == 0 and report["totals"]["done"] == 3

    again = flow.run(*BATCH, "--count", "2")  # all complete: nothing runs, a second pair of files
    assert again.returncode == 0, again.stderr
    again_summary = summary_of(again.stderr)
    assert "0 task(s) as batch jobs" in again_summary
    assert re.search(r"^  task family +where +already complete\n  Total +local +1$", again_summary, re.M)
    assert len(list((flow.folder / "logs").glob("b2batch-run-*.trace.json"))) == 2


def test_resubmissions_are_reported_with_their_reasons(workflow) -> None:
    flow = workflow("experience.py")
    run = flow.run(*BATCH, "--count", "1", "--fail", "0", "--resubmit", "1")
    assert run.returncode == 1, run.stderr
    summary = summary_of(run.stderr)
    ids = re.search(r"^  Part\(n=0\) on local: jobs (\S+), (\S+)$", summary, re.M)
    assert ids, summary
    assert "    1. the task failed and resubmit_failed_tasks is set" in summary
    trace_path, report_path = written_files(summary)
    spans = check_trace(json.loads(trace_path.read_text())["traceEvents"], jobs_expected=2)
    assert [(s["args"]["job_id"], s["args"]["state"]) for s in sorted(spans, key=lambda s: s["ts"])] == \
        [(ids.group(1), "resubmitted"), (ids.group(2), "failed")]
    assert len({s["tid"] for s in spans}) == 1  # one row per task
    first, second = sorted(spans, key=lambda s: s["ts"])
    assert first["ts"] + first["dur"] <= second["ts"]
    job = json.loads(report_path.read_text())["jobs"][0]
    assert job["resubmissions"] == ["the task failed and resubmit_failed_tasks is set"]
    assert job["job_ids"] == [ids.group(1), ids.group(2)]


def test_local_run_is_summarised_and_its_failure_sets_the_exit_status(workflow) -> None:
    flow = workflow("experience.py")
    # luigi's own worker (a local run on the engine is summarised as a batch run is: test_local_runs_on_engine.py)
    (flow.folder / "settings.json").write_text(json.dumps({"local_runs_on_engine": False}))
    run = flow.run("--count", "2", "--fail", "1")
    assert run.returncode == 1, run.stderr
    summary = summary_of(run.stderr)
    assert re.search(r"^3 task\(s\) in this process in [\d.]+ s:$", summary, re.M), summary
    assert re.search(r"^  Part +here +1 +1 +0$", summary, re.M), summary
    assert "  Part(n=1): failed in this process (its error is in the log above)" in summary
    assert "Timeline:" not in summary and not list(flow.folder.rglob("b2batch-run-*"))

    kept_going = flow.run("--count", "2", "--fail", "1", "--no-exit")
    assert kept_going.returncode == 0 and "after process: FAILED" in kept_going.stdout


# --- the pieces, without a run -----------------------------------------------------------------------------

def record(**fields) -> JobRecord:
    return JobRecord(task_id="T_1", family="T", params={"i": "1"}, system="slurm", **fields)


def test_attempts_split_a_history_into_jobs() -> None:
    history = [(1.0, "submitted", "7"), (2.0, "queued", "7"), (3.0, "running", "7"), (4.0, "resubmitted", "7"),
               (5.0, "submitted", "8"), (6.0, "running", "8"), (7.0, "waiting", "8"),  # new requirements
               (8.0, "submitted", "9"), (9.0, "queued", "9")]
    jobs = attempts(history, end=10.0)
    assert [(a.job_id, a.submitted, a.started, a.ended, a.state) for a in jobs] == [
        ("7", 1.0, 3.0, 4.0, "resubmitted"), ("8", 5.0, 6.0, 7.0, "new requirements"),
        ("9", 8.0, None, 10.0, "unfinished")]
    assert [a.state for a in attempts([(1.0, "failed", None)], end=2.0)] == ["not submitted"]


def test_trace_of_records_without_a_history_uses_their_times() -> None:
    done = record(job_ids=["42"], state="done", submitted_at=100.5, started_at=101.0, ended_at=103.0)
    never = JobRecord(task_id="U_1", family="U", params={}, system="slurm", state="failed", ended_at=101.5,
                      reason="could not be submitted")
    events = trace([done, never], {}, started_at=100.0, ended_at=104.0)["traceEvents"]
    spans = check_trace(events, jobs_expected=1)
    assert (spans[0]["ts"], spans[0]["dur"]) == (500_000, 2_500_000)
    instant = [e for e in events if e["ph"] == "i"]
    assert len(instant) == 1 and instant[0]["ts"] == 1_500_000 and instant[0]["args"]["state"] == "not submitted"


# --- luigi's execution summary: the one private piece of luigi the report reads ------------------------------

class SeamDone(luigi.Task):
    folder = luigi.Parameter()

    def output(self):
        return luigi.LocalTarget(str(Path(self.folder) / "done"))

    def run(self):
        Path(self.output().path).write_text("x")


class SeamBroken(luigi.Task):
    folder = luigi.Parameter()

    def output(self):
        return luigi.LocalTarget(str(Path(self.folder) / "never"))

    def run(self):
        raise RuntimeError("broken on purpose")


class SeamTop(luigi.Task):
    folder = luigi.Parameter()

    def requires(self):
        return [SeamDone(folder=self.folder), SeamBroken(folder=self.folder)]

    def output(self):
        return luigi.LocalTarget(str(Path(self.folder) / "top"))


def test_luigi_summary_sets_are_what_the_report_reads(tmp_path: Path) -> None:
    """Fails loudly if luigi changes ``luigi.execution_summary._summary_dict``."""
    result = luigi.build([SeamTop(folder=str(tmp_path))], local_scheduler=True, detailed_summary=True,
                         log_level="CRITICAL")
    sets = luigi_outcome(result)
    families = {name: sorted(t.task_family for t in tasks) for name, tasks in sets.items()}
    assert families["completed"] == ["SeamDone"]
    assert families["failed"] == ["SeamBroken"]
    assert families["upstream_failure"] == ["SeamTop"]
    assert families["still_pending_not_ext"] == ["SeamTop"]
    for name in ("already_done", "scheduling_error", "still_pending_ext", "upstream_missing_dependency",
                 "upstream_scheduling_error", "run_by_other_worker", "not_run"):
        assert families[name] == [], name
    assert luigi_outcome(None) == {}


def test_statuses_that_fail_the_run_are_luigis() -> None:
    from luigi.execution_summary import LuigiStatusCode

    from b2batch.luigi_frontend.outcomes import FAILED_STATUSES

    assert set(FAILED_STATUSES) < set(LuigiStatusCode.__members__)


def test_large_json_files_are_written_item_by_item_and_read_back_whole(tmp_path) -> None:
    """The report and timeline of a large run are encoded one job (event) at a time: the file reads back as the
    whole object would have been written, with an empty head or list too."""
    from b2batch.display.jsonfile import write_json

    items = [{"n": i, "path": Path("/x") / str(i), "h": [{"at": 1.5, "state": "done", "job_id": None}]}
             for i in range(3)]
    cases = [({"a": 1, "b": [1, 2]}, items), ({}, items), ({"a": "x"}, []), ({}, [])]
    for head, listed in cases:
        streamed, whole = tmp_path / "streamed.json", tmp_path / "whole.json"
        write_json(streamed, head, "jobs", iter(listed), indent=None, default=str)
        write_json(whole, head, "jobs", iter(listed), indent=1, default=str)
        assert json.loads(streamed.read_text()) == json.loads(whole.read_text()) == \
            json.loads(json.dumps({**head, "jobs": listed}, default=str))


def test_a_written_reports_head_is_read_and_changed_without_its_jobs(tmp_path) -> None:
    """read_head and rewrite_head (the accounting figures that come after the run): a large file's head is its
    first line, its jobs are copied byte for byte; a small one is read whole; either reads back as written
    with the head changed."""
    from b2batch.display.jsonfile import read_head, rewrite_head, write_json

    items = [{"n": i, "text": f"line\n{i} \"jobs\": [\n"} for i in range(3)]
    for head, indent in (({"a": 1, "pending": {"x": 2}}, None), ({}, None), ({"a": 1, "pending": {"x": 2}}, 1)):
        path = tmp_path / "report.json"
        write_json(path, head, "jobs", iter(items), indent=indent)
        tail = path.read_text().split("\n", 1)[1] if indent is None else None
        assert read_head(path, "jobs") == head
        rewrite_head(path, "jobs", lambda h: h.update(a=2, added=[1]))
        assert json.loads(path.read_text()) == {**head, "a": 2, "added": [1], "jobs": items}
        assert read_head(path, "jobs") == {**head, "a": 2, "added": [1]}
        if tail is not None:
            assert path.read_text().split("\n", 1)[1] == tail  # the jobs as they were written
        assert [p.name for p in tmp_path.iterdir()] == ["report.json"]  # no temporary file left
