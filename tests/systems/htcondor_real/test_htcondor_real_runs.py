"""b2batch's HTCondor system on a real HTCondor (tests/clusters/htcondor.sh), as the unprivileged test user.

Runs are shared between assertions (each costs seconds of the pool's negotiation cycle): one job-per-task run is
checked from the queue to ``condor_history``, the user log, the report's accounting; one failing run for exit
codes; one pilot run for ``b2batch status`` and ``cancel``; one killed and restarted run for adoption; one run
held by the pool's memory policy for escalation and resubmission.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path

import pytest

from helpers.htcondor_real import TestUser, test_user  # noqa: F401 (a fixture)

pytestmark = pytest.mark.slow


def settings(user: TestUser, **values: object) -> None:
    user.write(user.folder / "settings.json", json.dumps({"output_wait_timeout": 5, **values}))


def report(folder: Path) -> dict:
    found = sorted((folder / "logs").glob("b2batch-run-*.report.json"))
    assert found, f"no report in {folder / 'logs'}"
    return json.loads(found[-1].read_text())


def history(user: TestUser, job_ids: list[str], attributes: str) -> dict[str, dict]:
    """condor_history's ads of ``job_ids`` once the queue forgot them (a completed job stays a moment there)."""
    user.wait_queue(lambda ads: ads == [], constraint=" || ".join(
        f"(ClusterId == {j.split('.')[0]} && ProcId == {j.split('.')[1]})" for j in job_ids))
    done = user.condor("condor_history", "-json", "-attributes", attributes, *job_ids)
    assert done.returncode == 0, done.stderr
    return {f"{ad['ClusterId']}.{ad['ProcId']}": ad for ad in json.loads(done.stdout or "[]")}


def test_job_per_task_run_from_submit_to_history(test_user: TestUser) -> None:
    """Three tasks, an array of three procs: done, gone from the queue, in condor_history with exit code 0, a
    user log with submit/execute/terminate events, and the report's accounting (CPU, memory, node)."""
    test_user.copy_workflow("scheduler_jobs.py")
    settings(test_user, job_shape="job_per_task")
    done = test_user.python("scheduler_jobs.py", "--system", "htcondor", "--n", "3", timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(list((test_user.folder / "results").rglob("out.txt"))) == 3
    jobs = [j for j in report(test_user.folder)["jobs"] if j["family"] == "Work"]
    ids = [j["job_ids"][-1] for j in jobs]
    assert len({i.split(".")[0] for i in ids}) == 1 and sorted(i.split(".")[1] for i in ids) == ["0", "1", "2"]
    ads = history(test_user, ids, "ClusterId,ProcId,JobStatus,ExitCode,Owner,JobBatchName")
    assert {i: (ad["JobStatus"], ad["ExitCode"], ad["Owner"]) for i, ad in ads.items()} == {
        i: (4, 0, test_user.name) for i in ids}
    for job in jobs:
        usage = job["usage"]
        assert usage["source"].startswith("condor_history") and _this_host(usage["host"]), usage
        assert usage["max_rss"] > 0 and usage["req_mem"] == 128 * 2 ** 20 and usage["req_cpus"] == 1, usage
        assert usage["cpu"] is not None and usage["wall"] >= 0, usage
    logs = list((test_user.folder / "task_files" / "arrays").rglob("condor.log"))
    assert len(logs) == 1
    events = re.findall(r"^(\d{3}) \((\d+)\.(\d{3})\.000\)", logs[0].read_text(), re.M)
    for proc in ("000", "001", "002"):
        codes = [code for code, _, p in events if p == proc]
        assert codes[0] == "000" and "001" in codes and codes[-1] == "005", (proc, codes)
    assert "Efficiency (used / requested)" in done.stderr and "request_memory" in done.stderr


def test_failing_task_exit_code_and_stderr(test_user: TestUser) -> None:
    test_user.copy_workflow("scheduler_jobs.py")
    settings(test_user, job_shape="job_per_task")
    done = test_user.python("scheduler_jobs.py", "--system", "htcondor", "--n", "1", "--mode", "fail")
    assert done.returncode == 1
    assert "exited with code 1" in done.stderr and "deliberate failure of task 0" in done.stderr
    (job,) = [j for j in report(test_user.folder)["jobs"] if j["family"] == "Work"]
    assert job["state"] == "failed"
    # The job itself ended normally (the wrapper reports the task's failure by its exit code).
    ads = history(test_user, job["job_ids"], "ClusterId,ProcId,JobStatus,ExitCode")
    assert ads[job["job_ids"][-1]]["JobStatus"] == 4 and ads[job["job_ids"][-1]]["ExitCode"] == 1


def _wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"{what} not within {timeout} s")


def test_pilots_status_and_cancel(test_user: TestUser) -> None:
    """Default job_shape auto: 40 ready tasks go to pilot jobs; `b2batch status` shows them running in pilots
    with the pilot's job id; `b2batch cancel --yes` removes the pilots from the pool and the run ends."""
    test_user.copy_workflow("scheduler_jobs.py")
    settings(test_user)
    run = test_user.popen(sys_python(), "scheduler_jobs.py", "--system", "htcondor", "--n", "40", "--mode",
                          "sleep", "--seconds", "60")
    try:
        running = test_user.wait_queue(lambda ads: any(ad["JobStatus"] == 2 for ad in ads), timeout=90)
        # "running" alone would match the pilot summary line ("Pilot jobs on htcondor: 2 running") before a
        # pilot has taken its first task; wait for a task shown inside a pilot.
        status = _wait_for(lambda: (lambda d: d if "in pilot job" in d.stdout else None)(
            test_user.python("-m", "b2batch", "status", "scheduler_jobs.py")), 60, "a task in a pilot in b2batch status")
        pilot_ids = {f"{ad['ClusterId']}.{ad['ProcId']}" for ad in running + test_user.queue()}
        assert any(f"in pilot job {pilot_id} on vm" in status.stdout for pilot_id in pilot_ids), status.stdout[-3000:]
        assert re.search(r"Pilot jobs on htcondor: \d+ running", status.stdout), status.stdout[-3000:]
        assert len(test_user.queue()) < 40  # pilots, not a job per task
        cancel = test_user.python("-m", "b2batch", "cancel", "scheduler_jobs.py", "--yes")
        assert cancel.returncode == 0, cancel.stdout + cancel.stderr
        out, err = run.communicate(timeout=90)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode != 0
    test_user.wait_queue(lambda ads: ads == [], timeout=30)
    shapes = report(test_user.folder)["job_shapes"]
    assert "pilot" in json.dumps(shapes), shapes
    assert "cancel" in err.lower(), err[-3000:]


def test_pilots_figures_reach_the_report_after_the_run(test_user: TestUser) -> None:
    """The run returns without waiting for its pilots' accounting; the process it leaves behind
    (``b2batch.command.late_accounting``) writes condor_history's figures of the pilots into the report."""
    test_user.copy_workflow("scheduler_jobs.py")
    settings(test_user, job_shape="pilots", pilot_jobs=2)
    done = test_user.python("scheduler_jobs.py", "--system", "htcondor", "--n", "4", timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    deadline = time.monotonic() + 90
    while (found := report(test_user.folder))["accounting_pending"] and time.monotonic() < deadline:
        time.sleep(1)
    assert found["accounting_pending"] == {} and found["accounting"] == {"htcondor": "condor_history"}, found
    pilots = found["worker_jobs"]
    assert pilots and all(pilot["kind"] == "pilot" for pilot in pilots), pilots
    ran = [pilot for pilot in pilots if pilot["state"] == "done"]  # (one cancelled while queued has no figures)
    assert ran and f"the accounting figures of {len(ran)} pilot or bundle job(s) follow" in done.stderr, pilots
    for pilot in ran:
        usage = pilot["usage"]
        assert usage["source"].startswith("condor_history") and _this_host(usage["host"]), pilot
        assert usage["req_mem"] == 128 * 2 ** 20, pilot
        # its peak memory only where the starter sampled it: ResidentSetSize stays 0 for a pilot of a moment
        assert "max_rss" not in usage or usage["max_rss"] > 0, pilot


def _this_host(host: str) -> bool:
    """Whether HTCondor's name of the execute host (the part after the slot's @, maybe with a domain) is this one."""
    return host.split(".")[0] == os.uname().nodename.split(".")[0]


def sys_python() -> str:
    import sys

    return sys.executable


def test_restart_adopts_running_jobs(test_user: TestUser) -> None:
    """A steering process killed while its jobs run: the rerun follows the same jobs (no new condor_submit)
    and finishes the tasks."""
    test_user.copy_workflow("scheduler_jobs.py")
    settings(test_user, job_shape="job_per_task")
    args = ("scheduler_jobs.py", "--system", "htcondor", "--n", "2", "--mode", "sleep", "--seconds", "12")
    first = test_user.popen(sys_python(), *args)
    try:
        test_user.wait_queue(lambda ads: len(ads) == 2 and all(ad["JobStatus"] == 2 for ad in ads), timeout=90)
        before = {f"{ad['ClusterId']}.{ad['ProcId']}" for ad in test_user.queue()}
        # The steering Python (runuser's grandchild) dies at once, its jobs stay.
        steering = [int(p) for p in os.popen(f"pgrep -u {test_user.name} -f scheduler_jobs.py").read().split()]
        assert steering
        for pid in steering:
            os.kill(pid, signal.SIGKILL)
        first.wait(timeout=30)
    finally:
        if first.poll() is None:
            first.kill()
    assert {f"{ad['ClusterId']}.{ad['ProcId']}" for ad in test_user.queue()} == before
    second = test_user.python(*args, timeout=120)
    assert second.returncode == 0, second.stderr[-3000:]
    assert len(list((test_user.folder / "results").rglob("out.txt"))) == 2
    calls = report(test_user.folder)["scheduler_calls"]
    assert "condor_submit" not in calls, calls
    assert sorted(j["job_ids"][-1] for j in report(test_user.folder)["jobs"] if j["family"] == "Work") == sorted(
        before)


SLOW_TASK = '''"""A task that runs SECONDS seconds."""
import sys
import time

import b2batch


class Slow(b2batch.Task):
    seconds = b2batch.IntParameter()

    def output(self):
        yield self.add_to_output("slow.txt")

    def run(self):
        time.sleep(self.seconds)
        with open(self.get_output_file_name("slow.txt"), "w") as f:
            f.write("done\\n")


if __name__ == "__main__":
    b2batch.set_setting("batch_system", "htcondor")
    b2batch.set_setting("poll_interval", 0.5)
    b2batch.set_setting("max_poll_interval", 2)
    result = b2batch.process(Slow(seconds=int(sys.argv[1])), batch=True, exit_on_failure=False)
    sys.exit(0 if result.scheduling_succeeded else 1)
'''


def test_time_limit_hold_is_escalated_and_resubmitted(test_user: TestUser) -> None:
    """HTCondor holds a job that runs past its allowed_execute_duration (hold code 47); b2batch removes the held
    job and submits it again asking for retry_time_factor times as long; the task then ends. (The pool's memory
    hold policy is not tested: without cgroups this HTCondor measures a job's memory as its first process's.)"""
    test_user.write(test_user.folder / "slow.py", SLOW_TASK)
    settings(test_user, job_shape="job_per_task", htcondor_settings={"allowed_execute_duration": 5},
             retry_time_factor=4, max_retry_time="00:10:00")
    done = test_user.python("slow.py", "10", timeout=150)
    assert done.returncode == 0, done.stderr[-3000:]
    (job,) = [j for j in report(test_user.folder)["jobs"] if j["family"] == "Slow"]
    assert len(job["job_ids"]) == 2, job
    escalations = report(test_user.folder)["policies"]["escalations"]
    assert [e["cause"] for e in escalations] == ["time"], escalations
    first = history(test_user, job["job_ids"][:1], "ClusterId,ProcId,JobStatus,HoldReasonCode,AllowedExecuteDuration")
    assert first[job["job_ids"][0]]["AllowedExecuteDuration"] == 5, first
    second = history(test_user, job["job_ids"][1:], "ClusterId,ProcId,JobStatus,ExitCode,AllowedExecuteDuration")
    assert second[job["job_ids"][1]]["AllowedExecuteDuration"] == 20 and second[job["job_ids"][1]]["ExitCode"] == 0
    assert "Escalated" in done.stderr


def test_jobs_removed_and_held_by_the_user_mid_run(test_user: TestUser) -> None:
    """condor_rm of one running job and condor_hold of the other: the run ends with both tasks failed, each
    message naming what HTCondor did (Removed / Held, by the user), and the held job does not stay in the queue."""
    test_user.copy_workflow("scheduler_jobs.py")
    settings(test_user, job_shape="job_per_task")
    run = test_user.popen(sys_python(), "scheduler_jobs.py", "--system", "htcondor", "--n", "2", "--mode", "sleep",
                          "--seconds", "60")
    try:
        ads = test_user.wait_queue(lambda ads: len(ads) == 2 and all(ad["JobStatus"] == 2 for ad in ads), timeout=90)
        removed, held = sorted(f"{ad['ClusterId']}.{ad['ProcId']}" for ad in ads)
        assert test_user.condor("condor_rm", removed).returncode == 0
        assert test_user.condor("condor_hold", held).returncode == 0
        out, err = run.communicate(timeout=90)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 1, err[-3000:]
    assert "JobStatus 3 (Removed): via condor_rm (by user b2test)" in err, err[-3000:]
    assert "JobStatus 5 (Held): via condor_hold (by user b2test)" in err, err[-3000:]
    # b2batch removed the held job: it leaves the queue (a removed job shows JobStatus 3 until the schedd has
    # cleaned up after its shadow, which may take a moment after the run's end)
    _wait_for(lambda: test_user.queue() == [], 30, "the removed jobs to leave the queue")
    states = {j["job_ids"][-1]: j["state"] for j in report(test_user.folder)["jobs"] if j["family"] == "Work"}
    assert states == {removed: "failed", held: "failed"}, states


def test_bundles_of_tasks(test_user: TestUser) -> None:
    """tasks_per_job = 5: ten tasks in two bundle jobs on the pool, each task's output written, the report's worker
    jobs the two HTCondor jobs (accounted from condor_history)."""
    test_user.copy_workflow("scheduler_jobs.py")
    settings(test_user, tasks_per_job=5)
    done = test_user.python("scheduler_jobs.py", "--system", "htcondor", "--n", "10", timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(list((test_user.folder / "results").rglob("out.txt"))) == 10
    mine = f'regexp("^{test_user.folder}(/|$)", Iwd)'
    test_user.wait_queue(lambda ads: ads == [], constraint=mine)  # a completed job stays a moment in the queue
    ran = test_user.condor("condor_history", "-af", "ClusterId", "ProcId", "ExitCode", "-constraint",
                           mine).stdout.split("\n")
    ran = sorted(line for line in ran if line.strip())
    assert len(ran) == 2 and all(line.endswith(" 0") for line in ran), ran
    workers = report(test_user.folder)["worker_jobs"]
    assert sorted(w["job_id"] for w in workers) == sorted(".".join(line.split()[:2]) for line in ran), workers
