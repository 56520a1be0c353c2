"""Self-healing policies of luigi workflows (docs/policies.md), run for real with tests/workflows/policies.py:
poison tasks held back across runs (max_task_failures, --retry-failed, b2batch retry), a failure budget
(acceptance), and checkpoints on the batch system's warning (local jobs, and the real Slurm's time limit)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import clean_env

CLUSTER_SCRIPT = Path(__file__).resolve().parents[1] / "clusters" / "slurm.sh"
#: Every task in a job of its own (tasks_per_job set: no pilots), so that a task's jobs are its own.
OWN_JOBS = {"tasks_per_job": 1}


def _settings(folder: Path, **settings: object) -> None:
    (folder / "settings.json").write_text(json.dumps({**OWN_JOBS, **settings}))


def _report(folder: Path) -> dict:
    reports = sorted((folder / "logs").glob("b2batch-run-*.report.json"), key=os.path.getmtime)
    return json.loads(reports[-1].read_text())


def _summary(stderr: str) -> str:
    return stderr[stderr.index("===== b2batch summary"):]


def _starts(folder: Path) -> int:
    """How many jobs ran the poison task (each appends one line)."""
    path = folder / "poison-starts.txt"
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_a_poison_task_is_held_back_on_the_next_run_until_retry_or_retry_failed(workflow) -> None:
    flow = workflow("policies.py")
    _settings(flow.folder, max_task_failures=1)
    batch = ("--mode", "poison", "--batch", "--batch-system", "local")

    first = flow.run(*batch)
    assert first.returncode == 1, first.stderr[-3000:]
    assert _starts(flow.folder) == 1
    stderr_log = flow.folder / "logs" / "Poison" / "stderr"

    held = flow.run(*batch)  # failed max_task_failures times: no job for it
    assert held.returncode == 1, held.stderr[-3000:]
    assert _starts(flow.folder) == 1, "a poison task was submitted again"
    summary = _summary(held.stderr)
    assert "Poison(): not submitted to local" in summary, summary
    assert "it failed 1 time(s) in earlier runs, and max_task_failures is 1" in summary, summary
    assert f"Last error: ValueError: this input is broken for good (log: {stderr_log})" in summary, summary
    assert "--retry-failed" in summary and "b2batch retry" in summary, summary
    report = _report(flow.folder)
    poison_job = next(j for j in report["jobs"] if j["family"] == "Poison")
    assert poison_job["job_ids"] == [] and poison_job["state"] == "failed"
    [entry] = report["policies"]["poison_tasks"]
    assert entry["failures"] == 1 and entry["last_error"] == "ValueError: this input is broken for good"
    assert entry["log"] == str(stderr_log)

    retry = subprocess.run([sys.executable, "-m", "b2batch", "retry", "policies.py", "Pois*"], cwd=flow.folder,
                           env=clean_env(), capture_output=True, text=True, timeout=120)
    assert retry.returncode == 0, retry.stderr
    assert re.search(r"^  Poison__\w+: 1 failure\(s\), last: ValueError", retry.stdout, re.M), retry.stdout
    again = flow.run(*batch)
    assert again.returncode == 1 and _starts(flow.folder) == 2, again.stderr[-3000:]

    forced = flow.run(*batch, "--retry-failed")  # held back again, unless the run asks for it
    assert forced.returncode == 1 and _starts(flow.folder) == 3, forced.stderr[-3000:]


def test_luigis_retries_within_a_run_are_not_held_back_and_count_once(workflow) -> None:
    flow = workflow("policies.py")
    _settings(flow.folder, max_task_failures=2)
    (flow.folder / "luigi.cfg").write_text("[worker]\nkeep_alive = true\n[scheduler]\nretry_delay = 0.1\n"
                                           "retry_count = 3\n")
    run = flow.run("--mode", "poison", "--batch", "--batch-system", "local")
    assert run.returncode == 1, run.stderr[-3000:]
    assert _starts(flow.folder) == 3  # luigi's three attempts, beyond max_task_failures
    [counted] = (flow.folder / "task_files" / "Poison").glob("*/failures.json")
    assert json.loads(counted.read_text())["count"] == 1


def test_a_failure_budget_lets_the_aggregate_run_without_the_requirement_that_failed(workflow) -> None:
    flow = workflow("policies.py")
    _settings(flow.folder)
    run = flow.run("--mode", "acceptance", "--batch", "--batch-system", "local", "--workers", "8", timeout=300)
    assert run.returncode == 1, run.stderr[-3000:]  # part 7 failed: the run says so
    merged = (flow.folder / "results" / "merged.txt").read_text()
    assert merged == f"got {[n for n in range(20) if n != 7]}\nwithout [7]\n"
    summary = _summary(run.stderr)
    assert "Ran without some requirements (acceptance) (1):" in summary, summary
    assert "Merge() ran without 1 of 20 requirements (acceptance 0.95): Part(number=7)" in summary, summary
    [entry] = _report(flow.folder)["policies"]["acceptance"]
    assert entry["without"] == ["Part(number=7)"] and entry["requirements"] == 20


class _Job:
    """What a batch system's option check asks of a job: its settings."""

    def __init__(self, values: dict) -> None:
        from b2batch.engine.jobconfig import NO_SETTINGS

        self.config = NO_SETTINGS.replace(**values)

    def __str__(self) -> str:
        return "Count(steps=8)"


def test_a_checkpointing_task_asks_every_batch_system_for_its_warning_and_its_own_options_win() -> None:
    import b2batch
    from b2batch.luigi_frontend.checkpoint import with_warning
    from b2batch.systems.htcondor import checked_settings
    from b2batch.systems.lsf import bsub_options
    from b2batch.systems.sge import qsub_options
    from b2batch.systems.slurm import sbatch_options

    class Warned(b2batch.Task):
        def checkpoint(self):
            pass

    class Plain(b2batch.Task):
        pass

    task, plain = Warned(), Plain()
    seconds = 90  # the task's checkpoint_warning, as TaskJobs.config_of reads it
    assert sbatch_options(with_warning(task, "slurm_settings", {"time": "10"}, seconds), task) == [
        "--signal=B:USR1@90", "--time=10"]
    assert sbatch_options(with_warning(task, "slurm_settings", {"signal": "B:USR2@30"}, seconds), task) == [
        "--signal=B:USR2@30"]  # the task's own wins
    assert qsub_options(with_warning(task, "sge_settings", {}, seconds), task) == ["-notify"]
    lsf = with_warning(task, "lsf_settings", None, seconds)
    assert bsub_options(_Job({"lsf_settings": lsf})) == ["-wa", "USR1", "-wt", "2"]
    condor = checked_settings(_Job({"htcondor_settings": with_warning(task, "htcondor_settings", {}, seconds)}))
    assert condor["kill_sig"] == "SIGUSR1" and condor["want_graceful_removal"] == "true"
    assert with_warning(plain, "slurm_settings", {"time": "10"}, seconds) == {"time": "10"}  # no checkpoint(): unchanged
    assert with_warning(task, "env", {"A": "1"}, seconds) == {"A": "1"}
    # the resolver reads the task's checkpoint_warning once, into its JobConfig
    from b2batch.engine import Run
    from b2batch.luigi_frontend.jobs import RunContext, TaskJobs

    b2batch.set_setting("checkpoint_warning", 75)
    run = Run()
    try:
        jobs = TaskJobs(run, RunContext(script="flow.py"))
        assert jobs.config_of(task)["slurm_settings"] == {"signal": "B:USR1@75"}
        assert not jobs.config_of(plain)["slurm_settings"]
    finally:
        run.close()


def _steps(folder: Path) -> list[str]:
    return (folder / "steps.txt").read_text().splitlines()


def test_a_task_checkpoints_on_the_warning_signal_and_its_requeued_job_resumes(workflow) -> None:
    flow = workflow("policies.py")
    _settings(flow.folder)
    run = flow.run("--mode", "checkpoint", "--steps", "8", "--batch", "--batch-system", "local", timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    steps = _steps(flow.folder)
    assert steps == ["first start 0", "first step 1", "first step 2", "first step 3", "resumed start 3",
                     *[f"resumed step {n}" for n in range(4, 9)]], steps
    assert (flow.folder / "results" / "steps=8" / "count.txt").read_text() == "8\n"
    summary = _summary(run.stderr)
    assert "Checkpointed before the batch system's limit and requeued (1):" in summary, summary
    assert "Failed" not in summary
    [job] = _report(flow.folder)["jobs"]
    assert len(job["job_ids"]) == 2 and job["resubmissions"][0].startswith("checkpointed (SIGUSR1")
    assert not list((flow.folder / "task_files" / "Count").glob("*/checkpoint"))  # removed once done


def test_a_task_warned_before_its_run_began_is_requeued_without_its_checkpoint_and_runs(workflow) -> None:
    # The warning comes once b2batch set the task's handler but before run(): checkpoint() is not called (the
    # task's would fail: what it saves is set in run()), and luigi's event callbacks do not swallow the unwinding.
    flow = workflow("policies.py")
    _settings(flow.folder)
    run = flow.run("--mode", "checkpoint", "--steps", "4", "--warn-at-start", "--no-self-warning", "--batch",
                   "--batch-system", "local", timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert (flow.folder / "warned-at-start").exists()
    assert _steps(flow.folder) == ["first start 0", *[f"first step {n}" for n in range(1, 5)]]
    [job] = _report(flow.folder)["jobs"]
    assert len(job["job_ids"]) == 2, job
    assert job["resubmissions"][0].startswith("checkpointed (SIGUSR1 before the task began)"), job
    assert "Failed" not in _summary(run.stderr)
    first = (flow.folder / "logs" / "steps=4" / "Count" / "stderr.previous").read_text()
    assert "warned (SIGUSR1) before it began: nothing to save" in first and "Error" not in first, first


@pytest.mark.slow
@pytest.mark.slurm
def test_a_task_checkpoints_before_the_real_slurm_time_limit_and_resumes(workflow) -> None:
    if subprocess.run(["bash", str(CLUSTER_SCRIPT), "status"], capture_output=True).returncode != 0:
        if os.environ.get("CI"):
            pytest.fail("the local Slurm is not running: tests/run-all.sh starts it")
        pytest.skip("the local Slurm is not running (bash tests/clusters/slurm.sh start)")
    flow = workflow("policies.py")
    # A one-minute limit, warned 40 s before: 40 steps of 1 s cannot finish in the first job. Slurm sends the
    # warning up to a minute early, so a job may be warned before its first step, or before its run() began (then
    # it is requeued without a start line): each job resumes where the one before it saved its last step,
    # whenever its warning came.
    _settings(flow.folder, batch_system="slurm", slurm_settings={"time": "1"}, checkpoint_warning=40)
    run = flow.run("--mode", "checkpoint", "--steps", "40", "--step-seconds", "1", "--no-self-warning", "--batch",
                   timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    steps = _steps(flow.folder)
    starts = [int(line.split()[-1]) for line in steps if " start " in line]
    assert starts[0] == 0, steps
    last = 0
    for line in steps:  # each job resumed at the last step done before it: none redone, none skipped
        number = int(line.split()[-1])
        if " start " in line:
            assert number == last, (line, steps)
        else:
            assert number == last + 1, (line, steps)
            last = number
    done = [int(line.split()[-1]) for line in steps if " step " in line]
    assert sorted(set(done)) == list(range(1, 41)), steps
    assert (flow.folder / "results" / "steps=40" / "count.txt").read_text() == "40\n"
    [job] = _report(flow.folder)["jobs"]
    assert all(r.startswith("checkpointed (SIGUSR1") for r in job["resubmissions"]), job
    unbegun = sum("before the task began" in r for r in job["resubmissions"])
    assert len(job["job_ids"]) == len(starts) + unbegun and len(job["job_ids"]) >= 2, job  # requeued at least once
    submit = (flow.folder / "task_files" / "Count").glob("*/executable_wrapper.sh")
    assert "forward_warning" in next(submit).read_text()
