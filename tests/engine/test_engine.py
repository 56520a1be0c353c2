"""The engine without luigi: runs own their jobs (two runs in one process do not see each other's), a
simulated batch system drives the whole submit / poll / resubmit path, and a poll costs work for the jobs
whose answer changed, not for all jobs in flight."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from b2batch.engine import BatchSystem, Job, JobFiles, JobState, JobStatus, Run
from b2batch.engine.config import RunConfig
from b2batch.systems.local import LocalSystem
from helpers.simulated import Simulated, make_job


def test_two_runs_in_one_process_do_not_see_each_others_jobs(tmp_path: Path) -> None:
    first, second = Run(), Run()
    systems = [run.add_system("simulated", Simulated) for run in (first, second)]
    assert systems[0] is not systems[1] and first.tag != second.tag
    jobs = {run: [make_job(tmp_path / run.tag, f"{run.tag}-{i}") for i in range(3)] for run in (first, second)}
    for run, own in jobs.items():
        for job in own:
            run.submit(job)
    assert first.poll() == [] and second.poll() == []
    assert systems[0].submissions == [3] and systems[1].submissions == [3]
    systems[0].end(jobs[first][0], JobState(JobStatus.successful), 0)
    assert first.poll() == [jobs[first][0]] and second.poll() == []
    assert jobs[first][0].outcome.status == JobStatus.successful
    # interrupting one run cancels its jobs only
    killed = second.interrupt()
    assert len(killed) == 3 and systems[1].cancelled == ["1", "2", "3"] and systems[0].cancelled == []
    assert set(first.live) == {id(job) for job in jobs[first][1:]}
    assert first.record.jobs.keys() == {job.key for job in jobs[first]}
    assert second.record.jobs.keys() == {job.key for job in jobs[second]}


def test_a_lost_job_is_submitted_again_within_max_resubmissions(tmp_path: Path) -> None:
    run = Run()
    system = run.add_system("simulated", Simulated)
    job = make_job(tmp_path, "lost", max_resubmissions=1)
    run.submit(job)
    run.poll()
    job.files.stdout.parent.mkdir(parents=True, exist_ok=True)
    job.files.stdout.write_text("first job\n")
    lost = JobState(JobStatus.aborted, "node failed", scheduler_side="node failed")
    system.end(job, lost, 1)
    assert run.poll() == []  # submitted again, not ended
    assert job.resubmissions == 1 and job.files.read_exit_code() is None
    assert JobFiles.previous_log(job.files.stdout).read_text() == "first job\n"  # each job starts with empty logs
    assert run.poll() == [] and system.submissions == [1, 1]
    system.end(job, lost, 1)
    assert run.poll() == [job] and job.outcome.with_state(lost) == job.outcome  # the limit is reached: it ends
    record = run.record.jobs["lost"]
    assert record.resubmissions == ["node failed"] and record.job_ids == ["1", "2"]
    assert "Batch system: node failed" in job.failure_message()


def test_a_job_the_batch_system_rejects_ends_with_the_reason(tmp_path: Path) -> None:
    from b2batch.errors import BatchSystemError

    class Rejecting(Simulated):
        def submit(self, group: list[Job]) -> None:
            raise BatchSystemError("sbatch: error: Invalid partition name specified")

    run = Run()
    run.add_system("simulated", Rejecting)
    job = make_job(tmp_path, "rejected")
    run.submit(job)
    assert run.poll() == [job] and job.not_submitted
    assert "could not be submitted to simulated: sbatch: error: Invalid partition" in job.failure_message()


def test_a_poll_judges_only_the_jobs_whose_answer_changed(tmp_path: Path) -> None:
    """20,000 jobs in flight, ending a few hundred per poll: the work per poll follows the changes."""
    run = Run(config=RunConfig(max_array_size=100_000))
    system = run.add_system("simulated", Simulated)
    jobs = [make_job(tmp_path, f"j{i}") for i in range(20_000)]
    for job in jobs:
        run.submit(job)
    run.poll()
    assert sum(system.submissions) == 20_000 and len(system.submissions) <= 4  # arrays (a window may pass)
    ended = []
    for start in range(0, len(jobs), 500):
        for job in jobs[start:start + 500]:
            system.end(job, JobState(JobStatus.successful), 0)
        ended += run.poll()
        run.poll()  # nothing changed: nothing judged
    assert len(ended) == 20_000 and not run.live
    assert system.judged == 20_000, system.judged  # each job judged once: no O(N) work per poll
    assert system.queries <= 2 * 40 + 2


@pytest.mark.slow
def test_two_runs_of_local_jobs_in_one_process(tmp_path: Path) -> None:
    """Real processes: each run's local pool starts and follows its own jobs."""
    runs = [Run(poll_pause=0.05), Run(poll_pause=0.05)]
    for run in runs:
        run.add_system("local", LocalSystem)
    jobs = []
    for n, run in enumerate(runs):
        job = make_job(tmp_path / f"run{n}", f"r{n}", system="local")
        job.files.folder.mkdir(parents=True)
        job.files.write_wrapper(f"#!/bin/bash\necho {n} > {job.files.folder}/out; echo 0 > {job.files.exit_code}\n")
        run.submit(job)
        jobs.append(job)
    ended: list[list[Job]] = [[], []]
    for _ in range(200):
        for n, run in enumerate(runs):
            ended[n] += run.poll()
        if all(ended):
            break
        runs[0].wait()
    assert ended == [[jobs[0]], [jobs[1]]]
    assert (jobs[1].files.folder / "out").read_text() == "1\n"


def test_the_engine_imports_no_luigi() -> None:
    code = ("import sys, b2batch.engine, b2batch.engine.pilots.pooled_system, b2batch.engine.pilots.node_worker, b2batch.systems.slurm, "
            "b2batch.systems.local, b2batch.display.report, "
            "b2batch.display.progress; "
            "print('luigi' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_a_jobs_process_loads_no_display_library() -> None:
    """What a job or pilot of a workflow imports before its first task (its start is on every run's path): no
    terminal display (rich: only b2luigi's --dry-run, --show-output and --remove print with it) and no job-script
    templates (jinja2: the steering process writes the scripts)."""
    code = ("import sys, b2batch.luigi_frontend.task_on_node, b2batch.engine.pilots.node_worker; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'rich', 'jinja2'}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


#: Settings that do not shape a batch job's submission or environment: units that differ in them may share a
#: pilot or bundle job. A new setting must be put here, in a batch system's job_settings or in
#: pooled.WORKER_SETTINGS (the test below says so).
NOT_JOB_SHAPING = {
    "result_dir", "log_dir", "task_file_dir", "job_folder_layout", "scratch_dir", "parameter_separator",
    "use_parameter_name_in_output",
    "batch_system", "local_slots", "local_start", "poll_interval", "max_poll_interval", "max_resubmissions",
    "resubmit_failed_tasks", "exit_on_failure", "max_jobs_in_flight", "max_scheduler_calls_per_second",
    "max_array_size", "submission_window", "scheduler_unreachable_timeout", "scheduler_call_timeout", "unit_logs",
    "output_wait_timeout", "remote_retries", "tasks_per_job", "pilot_jobs", "max_grouping_size", "job_shape",
    "run_summary", "unknown_setting_warnings", "b2luigi_hashing", "process_returns_result", "b2luigi_texts",
    "process_once", "local_runs_send_jobs", "local_runs_on_engine", "workers",
    # run-level policies and the live state: escalation rewrites a job of its own (never a pilot's or bundle's);
    # a checkpointing task always runs in a job of its own
    "retry_memory_factor", "retry_time_factor", "max_retry_memory", "max_retry_time", "max_node_failures",
    "max_task_failures", "checkpoint_warning", "max_checkpoint_requeues", "live_state",
}


def test_every_setting_is_known_to_shape_a_pooled_job_or_not() -> None:
    from b2batch.settings import SETTINGS
    from b2batch.systems import job_settings_of_all

    shaping = job_settings_of_all()
    undecided = set(SETTINGS) - shaping - NOT_JOB_SHAPING
    assert not undecided, (f"settings {sorted(undecided)}: add each to the job_settings of the batch system whose "
                           f"jobs it shapes (or pooled.WORKER_SETTINGS) if tasks that differ in it must not share a "
                           f"pilot or bundle job, else to NOT_JOB_SHAPING here")
    assert not shaping & NOT_JOB_SHAPING


def test_pilots_and_bundles_name_no_batch_systems_settings() -> None:
    import b2batch.engine as engine
    from b2batch.settings import SETTINGS

    system_settings = {"slurm_settings", "sge_settings", "htcondor_settings", "htcondor_pool", "htcondor_schedd",
                       "transfer_files", "job_slots", "lsf_settings", "container", "env", "executable", "shell"}
    assert system_settings <= set(SETTINGS)
    for name in ("pilots/pooled_system.py", "pilots/worker_jobs.py", "pilots/unit_pool.py", "pilots/kinds.py"):
        module = Path(engine.__file__).parent / name
        text = module.read_text()
        named = sorted(name for name in system_settings if f'"{name}"' in text or f"'{name}'" in text)
        assert not named, f"{module.name} names the settings {named}; the batch systems declare them"


def test_units_in_other_containers_or_schedds_never_share_a_worker_job(tmp_path: Path) -> None:
    from b2batch.engine.pilots.unit_pool import WORKER_SETTINGS, signature
    from b2batch.systems.htcondor import HTCondorSystem
    from b2batch.systems.local import LocalSystem
    from b2batch.systems.slurm import SlurmSystem

    for inner in (HTCondorSystem, LocalSystem, SlurmSystem):
        unset = dict.fromkeys((*inner.job_settings, *WORKER_SETTINGS))
        base = make_job(tmp_path, "a", **unset)
        assert signature(base, inner) == signature(make_job(tmp_path, "b", **unset, max_grouping_size=3), inner)
        for name, value in [("container", {"engine": "podman", "image": "x"}), ("apptainer_image", "/img.sif"),
                            ("env", {"A": "1"}), ("pilot_idle_timeout", 5)]:
            other = make_job(tmp_path, "c", **{**unset, name: value})
            assert signature(other, inner) != signature(base, inner), (inner.name, name)
    unset = dict.fromkeys((*HTCondorSystem.job_settings, *WORKER_SETTINGS))
    other = make_job(tmp_path, "c", **{**unset, "htcondor_schedd": "other"})
    assert signature(other, HTCondorSystem) != signature(make_job(tmp_path, "a", **unset), HTCondorSystem)


@pytest.mark.parametrize("name, value", [("htcondor_settings", {"request_cpus": 2}), ("htcondor_schedd", "other"),
                                         ("slurm_settings", {"mem": "2G"}), ("lsf_settings", {"W": "60"}),
                                         ("queue", "short"), ("sge_settings", {"queue": "all.q"})])
def test_units_that_differ_only_in_settings_of_other_batch_systems_share_a_local_pilot(tmp_path: Path, name: str,
                                                                                       value: object) -> None:
    from b2batch.engine.pilots.unit_pool import WORKER_SETTINGS, signature
    from b2batch.systems.local import LocalSystem

    unset = dict.fromkeys((*LocalSystem.job_settings, *WORKER_SETTINGS, name))
    other = make_job(tmp_path, "c", **{**unset, name: value})
    assert signature(other, LocalSystem) == signature(make_job(tmp_path, "a", **unset), LocalSystem)
