"""The HTML report of a run, looked at in a real headless browser (Debian's chromium), and the ``b2batch
report`` and ``b2batch history`` commands that read the JSON reports of earlier runs."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest

from b2batch.display.html import MAX_FAILURES, render

PILOTS = ("--system", "local", "--n", "6", "--pilots", "2", "--segv", "3")


def chromium() -> str:
    """The headless browser; skipped where it is missing, except under the test command."""
    found = shutil.which("chromium")
    if found is None:
        message = "chromium is not installed (tests/run-all.sh installs Debian's chromium)"
        if os.environ.get("B2BATCH_REQUIRE_BROWSER"):
            pytest.fail(message)
        pytest.skip(message)
    return found


def load(page: Path, folder: Path) -> tuple[str, list[str], Path]:
    """Open ``page`` in headless chromium: (the rendered DOM, the console's messages, a screenshot)."""
    shot = folder / "screenshot.png"
    run = subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                          f"--user-data-dir={folder / 'chromium-profile'}", "--enable-logging=stderr", "--v=0",
                          "--window-size=1400,3000", f"--screenshot={shot}", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=180, check=False)
    assert run.returncode == 0, run.stderr
    console = [line for line in run.stderr.splitlines() if ":CONSOLE" in line]
    return run.stdout, console, shot


class _Text(HTMLParser):
    """The text a reader sees: without style and script, whitespace collapsed."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._hidden = 0

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self._hidden += tag in ("style", "script", "title")

    def handle_endtag(self, tag: str) -> None:
        self._hidden -= tag in ("style", "script", "title")

    def handle_data(self, data: str) -> None:
        if not self._hidden:
            self.parts.append(data)


def text_of(dom: str) -> str:
    parser = _Text()
    parser.feed(dom)
    return re.sub(r"\s+", " ", " ".join(parser.parts))


def b2batch(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "b2batch", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, check=False)


def test_a_runs_html_report_shows_its_numbers_in_a_browser_and_history_lists_the_run(workflow, tmp_path) -> None:
    flow = workflow("pilots.py")
    run = flow.run(*PILOTS)
    assert run.returncode == 1, run.stderr
    page = Path(re.search(r"^HTML: +(\S+) \(open in a web browser\)$", run.stderr, re.M).group(1))
    report_path = Path(re.search(r"^Report: +(\S+)", run.stderr, re.M).group(1))
    assert page.parent == report_path.parent == flow.folder / "logs"
    assert page.name == report_path.name.replace(".report.json", ".report.html")
    report = json.loads(report_path.read_text())
    failed = next(j for j in report["jobs"] if j["state"] == "failed")
    pilot = failed["carrier"].split(" (")[0]
    assert re.fullmatch(r"pilot job \S+ on local", pilot), failed["carrier"]

    source = page.read_text()
    # self-contained: nothing is fetched when the page is opened (the SVG namespace is a name, not a fetch)
    assert not re.search(r"\b(src|href)\s*=|url\(|@import", source), "the page refers to another file"
    dom, console, shot = load(page, tmp_path)
    print(f"screenshot of the report: {shot}")
    assert console == [], console  # no errors (nor anything else) on the browser's console
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
    text = text_of(dom)
    # pilots are sized to the backlog: the second of the two allowed starts only while work still waits
    pilots = {worker["job_id"] for worker in report["worker_jobs"]}
    assert 1 <= len(pilots) <= 2, pilots
    assert pilots >= {i for j in report["jobs"] for i in j.get("job_ids") or []}  # the tasks name their pilot's id
    assert re.search(rf"\b5 tasks done 1 tasks failed 1 tasks not run {len(pilots)} batch jobs\b", text), \
        text[:600]
    assert re.search(r"Tasks per family task family where done failed not run Leaf local-pilots 5 1 0 "
                     r"Sum local 0 0 1\b", text), text[:1200]
    assert f"stderr: {failed['stderr']}" in text  # the failure's log paths, its reason and its log tail
    assert "exited with code 139 (killed by SIGSEGV)" in text
    assert f"Ran in {failed['carrier']}." in text  # the pilot's own log
    assert re.sub(r"\s+", " ", failed["stderr_tail"].splitlines()[-1].strip()) in text
    assert "Failures (1)" in text and "Not run or unfinished (1)" in text
    assert re.search(r"Queue wait per task .* 6 tasks: median [\d.]+ s", text), text
    assert re.search(r"Run time per task .* 6 tasks", text) and re.search(r"Run time per batch job .* batch jobs", text)
    leaf = (report.get("efficiency") or {}).get("Leaf")
    if leaf:  # the wrapper's own figures: every job has them, so has the family
        assert re.search(rf"Efficiency per family task family where jobs CPU eff\. .*Leaf local-pilots 6 "
                         rf"{leaf['cpu_efficiency']:.0%} ", text), text
    else:
        assert "This report has no resource figures" in text
    svg_labels = re.findall(r'<text class="label"[^>]*><title>[^<]*</title>([^<]*)</text>', dom)
    assert sorted(set(svg_labels)) == sorted({j["carrier"].split(" (")[0] for j in report["jobs"] if j["carrier"]})
    assert dom.count(f'{failed["family"]}(i=3, slow=-1, seconds=0.0, segv=3): failed') == 1  # the task in its pilot

    again = b2batch("report", str(flow.folder / "logs"), cwd=tmp_path)  # the same page from the JSON report
    assert again.returncode == 0 and again.stdout.strip() == str(page), again.stderr
    assert page.read_text() == source

    listed = b2batch("history", "--json", str(flow.script), cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    [past] = json.loads(listed.stdout)
    assert (past["tasks"], past["done"], past["failed"], past["result"]) == (7, 5, 1, "failed")
    assert past["jobs"] == len(pilots)
    cpu = [j["usage"]["cpu"] for j in report["jobs"] if "cpu" in (j.get("usage") or {})]  # the wrapper's figures
    assert past["report"] == report_path.name
    assert past["cpu_hours"] == (pytest.approx(sum(cpu) / 3600) if cpu else None)
    table = b2batch("history", str(flow.folder / "logs"), cwd=tmp_path)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0] == f"Runs in {flow.folder / 'logs'}:"
    figures = " +CPU-hours +CPU eff\\. +memory eff\\." if cpu else ""  # with the jobs' figures
    assert re.match(rf"started +took +tasks +done +failed +jobs{figures} +result +report$", lines[1].rstrip()), lines
    figures = r" +(<0\.01|[\d.]+) +\d+% +-" if cpu else ""
    assert re.match(rf"\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d\S* +[\d.]+ s +7 +5 +1 +{len(pilots)}" + figures
                    + " +failed +" + re.escape(report_path.name) + "$", lines[2].rstrip()), lines


def test_history_lists_runs_oldest_first_and_says_where_it_found_none(tmp_path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    nothing = b2batch("history", str(logs), cwd=tmp_path)
    assert nothing.returncode == 1 and nothing.stdout == ""
    assert nothing.stderr.startswith(f"b2batch history: no run reports (b2batch-run-*.report.json) in {logs} ")
    script = tmp_path / "flow.py"
    script.write_text("")
    (tmp_path / "settings.json").write_text(json.dumps({"log_dir": "logs"}))
    for n, (started, failed) in enumerate([(200.0, False), (100.0, True)]):
        report = synthetic(3, started=started, failures=int(failed))
        report["script"] = str(script) if n else "/elsewhere/other.py"
        (logs / f"b2batch-run-{n}.report.json").write_text(json.dumps(report))
    every = json.loads(b2batch("history", "--json", cwd=tmp_path).stdout)  # the log_dir seen from here
    assert [r["started_at"] for r in every] == [100.0, 200.0] and [r["failed"] for r in every] == [1, 0]
    mine = json.loads(b2batch("history", "--json", str(script), cwd=tmp_path).stdout)
    assert [r["report"] for r in mine] == ["b2batch-run-1.report.json"]
    table = b2batch("history", cwd=tmp_path).stdout
    assert "script" in table.splitlines()[1] and "other.py" in table and "flow.py" in table
    bad = b2batch("report", str(tmp_path / "settings.json"), cwd=tmp_path)
    assert bad.returncode == 1
    assert bad.stderr == f"b2batch report: {tmp_path / 'settings.json'} is not a b2batch run report (no 'jobs' and 'totals')\n"


def synthetic(jobs: int, started: float = 1_000_000.0, failures: int = 0, families: int = 5) -> dict:
    """A report of ``jobs`` own jobs (every tenth queued a minute, each run a few minutes), the first
    ``failures`` of them failed with a log tail."""
    records = []
    for i in range(jobs):
        submitted = started + (i // 10) * 0.5
        begin = submitted + 5 + i % 60
        end = begin + 60 + (i * 37) % 600
        state = "failed" if i < failures else "done"
        records.append({
            "task_id": f"Reco_{i}", "family": f"Reco{i % families}", "params": {"run": str(i)}, "system": "slurm",
            "job_ids": [str(100000 + i)], "state": state, "submitted_at": submitted, "started_at": begin,
            "ended_at": end, "reason": f"Task Reco{i % families} (run={i}) failed: job {100000 + i} on slurm exited "
                                       f"with code 1." if state == "failed" else "",
            "resubmissions": [], "stdout": f"/data/logs/run={i}/Reco/stdout", "stderr": f"/data/logs/run={i}/Reco/stderr",
            "stderr_tail": "\n".join(f"line {k} of the log of {i}" for k in range(10)) if state == "failed" else "",
            "carrier": "",
            "history": [{"at": submitted, "state": "submitted", "job_id": str(100000 + i)},
                        {"at": begin, "state": "running", "job_id": str(100000 + i)},
                        {"at": end, "state": state, "job_id": str(100000 + i)}]})
    ended = max(r["ended_at"] for r in records)
    return {"b2batch_version": "0", "script": "/data/flow.py", "argv": [], "mode": "batch", "started_at": started,
            "ended_at": ended, "started": "2026-01-01T00:00:00+0000", "ended": "2026-01-01T03:00:00+0000",
            "elapsed_seconds": ended - started, "interrupted": False, "failed": failures > 0,
            "exit_status": int(failures > 0), "luigi_status": None,
            "totals": {"done": jobs - failures, "failed": failures, "not run": 0, "missing": 0, "unfinished": 0,
                       "already complete": 0, "jobs": jobs, "resubmissions": 0},
            "by_family": {f"Reco{f}": {"slurm": {"done": 0}} for f in range(families)},
            "scheduler_calls": {"sbatch": 10, "squeue": 100}, "jobs": records, "other_tasks": [], "trace": ""}


def test_the_page_of_10000_jobs_is_small_aggregated_and_shows_the_first_failures_in_full(tmp_path) -> None:
    report = synthetic(10_000, failures=300)
    started = time.perf_counter()
    page = render(report)
    took = time.perf_counter() - started
    assert len(page.encode()) < 2_000_000, len(page.encode())  # the target is 5 MB; it is far below
    assert "one lane per task family" in page and page.count('<text class="label"') < 20
    assert page.count('class="failure"') == MAX_FAILURES and "line 9 of the log of 99<" in page
    assert "And 200 more failed jobs, by family and reason" in page
    kinds = re.findall(r'<td>(Reco\d)</td><td class="l">job on slurm exited with code 1\.</td><td>(\d+)</td>', page)
    assert sorted(f for f, _n in kinds) == [f"Reco{f}" for f in range(5)]  # one kind per family, whatever the job
    assert sum(int(n) for _f, n in kinds) == 200
    print(f"10,000 jobs: {len(page.encode()) / 1e6:.2f} MB made in {took:.2f} s")


def test_the_page_template_is_compiled_once_and_loaded_by_later_runs(tmp_path, monkeypatch) -> None:
    """jinja's bytecode cache keeps the page's compiled template: a later process (here: this one with its
    template forgotten) renders the page without compiling it again (~14 ms of a run's end)."""
    import tempfile

    import jinja2

    from b2batch.display import html

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # jinja's cache folder goes under the temporary one
    monkeypatch.setattr(html, "_page", html._page.__wrapped__)  # each call a new process's first
    report = synthetic(20, failures=2)
    first = render(report)
    assert list(tmp_path.glob("_jinja2-cache-*/*")), "no compiled template kept"

    def compiling(*args, **kwargs):
        raise AssertionError("the page's template was compiled again")

    monkeypatch.setattr(jinja2.Environment, "compile", compiling)
    assert render(report) == first


def with_usage(report: dict) -> dict:
    """``report`` with each job's figures and the efficiency per family, as a run with accounting has them."""
    for i, job in enumerate(report["jobs"]):
        job["usage"] = {"wall": 100.0, "cpu": 25.0 if i % 2 else 75.0, "max_rss": 300 * 2**20, "req_mem": 1000 * 2**20,
                        "req_cpus": 1, "host": f"node{i % 3}", "cause": "memory" if job["state"] == "failed" else "",
                        "source": "sacct+wrapper"}
    report["efficiency"] = {
        "Reco0": {"system": "slurm", "jobs": 2, "cpu_efficiency": 0.5, "memory_efficiency": 0.3, "cpu_hours": 0.0278,
                  "peak_memory_mb": 300.0, "p95_memory_mb": 300.0, "requested_memory_mb": 1000.0,
                  "killed_for_memory": 1, "killed_for_time": 0, "failed_nodes": {"node0": 1},
                  "sources": {"sacct+wrapper": 2}, "suggested_memory_mb": 400, "suggested_request": "--mem=400M",
                  "suggested_setting": 'slurm_settings={"mem": "400M"}'},
        "Reco1": {"system": "slurm", "jobs": 2, "cpu_efficiency": 0.5, "memory_efficiency": 0.3, "cpu_hours": 0.0278,
                  "peak_memory_mb": 2300.0, "killed_for_memory": 0, "killed_for_time": 0, "failed_nodes": {}}}
    return report


def test_efficiency_per_family_and_the_runs_cpu_hours_and_efficiency_come_from_the_reports_figures(tmp_path) -> None:
    report = with_usage(synthetic(4, failures=1, families=2))
    text = text_of(render(report))
    assert "CPU-hours" in text and re.search(r"\b0\.06 CPU-hours\b", text)  # 4 jobs: 25 + 75 + 25 + 75 CPU s
    assert ("Efficiency per family task family where jobs CPU eff. memory eff. CPU-hours peak memory "
            "95% of peaks under requested killed for memory killed for time failed on suggested request "
            "Reco0 slurm 2 50% 30% 0.03 300 MB 300 MB 1000 MB 1 0 node0 (1) "
            '--mem=400M (slurm_settings={"mem": "400M"}) '
            "Reco1 slurm 2 50% 30% 0.03 2.2 GB - - 0 0 - -") in text, text
    assert re.search(r"Reco0\(run=0\) job 100000 on slurm, on node node0", text)  # the failure's node
    report["policies"] = {"checkpoints": [{"text": "Reco1(run=1): checkpointed and requeued (job 100001)"}]}
    assert ("What the self-healing policies did checkpoints (1) Reco1(run=1): checkpointed and requeued "
            "(job 100001)") in text_of(render(report))
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "b2batch-run-1.report.json").write_text(json.dumps(report))
    [past] = json.loads(b2batch("history", "--json", str(logs), cwd=tmp_path).stdout)
    assert past["cpu_hours"] == pytest.approx(200 / 3600)
    assert past["cpu_efficiency"] == pytest.approx(0.5) and past["memory_efficiency"] == pytest.approx(0.3)
    table = b2batch("history", str(logs), cwd=tmp_path).stdout.splitlines()
    assert re.match(r"started +took +tasks +done +failed +jobs +CPU-hours +CPU eff\. +memory eff\. +result", table[1])
    assert re.search(r" 4 +3 +1 +4 +0\.06 +50% +30% +failed ", table[2]), table


@pytest.mark.parametrize("pilots", [20, 150])
def test_many_rows_become_lanes_per_pilot_or_per_family(pilots) -> None:
    report = synthetic(1000)
    for i, job in enumerate(report["jobs"][:600]):  # 600 tasks in pilots, 400 own jobs
        job["carrier"] = f"pilot job {i % pilots} on slurm (its log: /data/pilots/{i % pilots}/stderr)"
    page = render(report)
    labels = re.findall(r'<text class="label" x="[\d.]+" y="[\d.]+">([^<]*)</text>', page)
    pilot_lanes = [label for label in labels if label.startswith("pilot job")]
    family_lanes = [label for label in labels if re.fullmatch(r"Reco\d on slurm \(\d+\)", label)]
    if pilots <= 100:  # a lane per pilot (its tasks) and per family (its own jobs)
        assert len(pilot_lanes) == pilots and sum(int(re.search(r"\((\d+)\)", x).group(1)) for x in pilot_lanes) == 600
        assert sum(int(re.search(r"\((\d+)\)", x).group(1)) for x in family_lanes) == 400
    else:  # too many pilots: the tasks in them join their family's lane
        assert pilot_lanes == [] and len(family_lanes) == 5
        assert sum(int(re.search(r"\((\d+)\)", x).group(1)) for x in family_lanes) == 1000


def test_lanes_shade_each_stretch_of_time_by_how_many_ran_then() -> None:
    from b2batch.display.charts import occupancy

    svg = occupancy({"A": [(0.0, 10.0, "done"), (5.0, 10.0, "done"), (2.5, 5.0, "failed")]}, 0.0, 10.0, bins=4)
    tips = re.findall(r"<title>A: ([^<]*)</title>", svg)
    assert tips == ["1.0 running on average at +0.00 s", "2.0 running on average at +2.5 s, 1 failed",
                    "2.0 running on average from +5.0 s to +10.0 s"]  # like neighbours are one cell


def test_jobs_over_time_counts_the_jobs_queued_and_running_at_each_bins_middle() -> None:
    from b2batch.display.charts import over_time

    svg = over_time([(0.0, 5.0, 10.0), (0.0, None, 4.0), (6.0, 8.0, 9.0)], 0.0, 10.0, bins=4)
    tips = sorted(set(re.findall(r"<title>\+([\d.]+) s: (\d+) running, (\d+) queued</title>", svg)))
    assert tips == [("1.2", "0", "2"), ("3.8", "0", "2"), ("6.2", "1", "1"), ("8.8", "2", "0")]


def test_jobs_not_ended_count_until_the_run_ended() -> None:
    report = synthetic(3)
    job = report["jobs"][2]
    job.update(state="queued", started_at=None, ended_at=None, history=job["history"][:1])
    page = render(report)
    section = page[page.index("<h2>Jobs over time"):page.index("<h2>Distributions")]
    last = re.findall(r"<title>\+[^:]+: \d+ running, (\d+) queued</title>", section)[-1]
    assert last == "1"  # still queued when the run ended
    assert "Not run or unfinished (1)" in page and "still queued when the run ended" in page
