"""Which tier a test is in and which tests must not run at the same time (``tests/conftest.py`` applies both).

The fast tier (``pytest -m "not slow"``) starts no scheduler, no cluster and no workflow process: a test that
takes a fixture that starts one (``WORKFLOW_FIXTURES``), or needs a cluster (the ``slurm``/``sge`` markers or
fixtures), or is in ``tests/e2e/``, is marked ``slow`` here; other slow tests carry ``@pytest.mark.slow``.

The whole suite runs under pytest-xdist (``tests/run-all.sh``: ``-n N --dist loadgroup``). Tests that share
something that one test may disturb for the others run in one ``xdist_group``, one after another on one worker:

* ``slurm``, ``sge``, ``htcondor-real``: the one local cluster of each kind (some tests stop and restart its
  daemons, or fill its slots, and a job of one test must not wait behind another test's jobs);
* ``timing``: tests that assert how long something took, or how much memory or CPU it used, so that two of
  them do not load the machine at once;
* one group per file in ``SHARED_SETUP_FILES``: its tests share a costly module fixture (runs of the real b2luigi
  beside ours, a venv, the docs' site). A module fixture is made once per worker that runs one of the module's
  tests: spread over three workers, the b2luigi corpus ran up to three times, each worker's fixture starting
  every case.
"""

from __future__ import annotations

from pathlib import Path

import pytest

#: Fixtures that start a workflow process, a scheduler (or its emulator) or a server.
WORKFLOW_FIXTURES = frozenset({"workflow", "emulated", "flows", "flow", "luigid", "xrootd_server",
                               "webdav_server", "stoppable_server", "podman", "workers"})
CLUSTERS = ("slurm", "sge")
#: Files whose tests (nearly all) run local jobs, farmers or the real peers as processes: slow as a whole.
PROCESS_FILES = frozenset({
    "test_calls.py", "test_joblib_backend.py", "test_joblib_messages.py", "test_joblib_shapes.py",
    "test_joblib_conformance.py", "test_pool.py", "test_pool_messages.py", "test_pool_systems.py",  # local jobs
    "test_farm.py", "test_farm_batch.py",  # farmers and their lines
    "test_farm_differential.py", "test_pool_differential.py", "test_joblib_differential.py",  # the real peers
    "test_b2luigi_differential.py", "test_b2luigi_cli.py", "test_b2luigi_cli_test.py",
    "test_docs_paths.py",  # a workflow on each batch system
    "test_local_runs_on_engine.py",  # workflows without --batch, in local pilots
})
#: Single tests elsewhere that run a workflow, a luigid or local jobs.
PROCESS_TESTS = frozenset({
    "test_the_live_state_is_written_at_most_once_a_second_and_not_when_nothing_changed",
    "test_luigid_worker_runs_tasks_through_a_job_like_process",
    "test_batch_on_local_runs_workers_tasks_at_once_in_child_processes",
    "test_the_readme_example_runs_from_the_repository_root_on_the_batch_system_of_its_settings",
    "test_auto_says_which_batch_system_it_chose_and_why_before_the_first_submission",
    "test_a_custom_batch_process_runs_as_under_b2luigi",
    "test_an_array_element_that_cannot_be_submitted_is_named_as_itself",
    "test_a_tasks_own_log_file_dir_holds_its_jobs_and_its_dispatched_runs_logs",
    "test_dry_run_show_output_and_remove_say_and_do_what_b2luigi_does",
    "test_no_setting_adds_a_command_to_a_submit_file",
    "test_apptainer_batch_system_runs_tasks_in_apptainer",
    "test_emulate_says_in_one_line_that_a_command_cannot_run",
    "test_a_local_job_without_all_its_outputs_fails_at_once_naming_the_missing_one",
    "test_a_task_that_exits_with_3_is_not_taken_for_a_failed_set_up",
    "test_pool_takes_job_shape_auto_and_pypoolparty_keeps_a_job_per_item",
})
#: Files whose tests share a costly module (or session) fixture: each runs on one worker, so the fixture is made once.
SHARED_SETUP_FILES = frozenset({"test_b2luigi_differential.py", "test_b2luigi_cli.py", "test_b2luigi_cli_test.py",
                                "test_b2luigi_last_mile.py", "test_docs.py"})
#: Whole files whose tests assert times, memory or CPU.
TIMING_FILES = frozenset({"test_work_queue.py", "test_unit_processes.py", "test_monitor.py", "test_progress.py",
                          "test_steering_memory.py"})
#: Single tests that assert times.
TIMING_TESTS = frozenset({"test_local_job_that_ignores_sigterm_gets_sigkill_after_the_grace",
                          "test_condor_q_and_bjobs_on_1000_jobs_are_fast",
                          "test_local_job_that_ends_on_sigterm_is_not_killed_harder",
                          "test_signal_puts_running_lines_back",
                          "test_a_line_killed_by_sigterm_with_no_stop_following_fails_after_a_moment",
                          "test_scheduler_commands_are_paced_per_batch_system_of_a_run_and_counted"})


def cluster_of(item: pytest.Item) -> str | None:
    """The local cluster a test uses, if any: by marker, by fixture, or by its ``system`` parameter."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    if "htcondor_real" in Path(str(item.fspath)).parts or "htcondor_real" in item.name:
        return "htcondor-real"
    for name in CLUSTERS:
        if item.get_closest_marker(name) or name in item.fixturenames or name in params.values():
            return name
    return None


def group_of(item: pytest.Item) -> str | None:
    cluster = cluster_of(item)
    if cluster:
        return cluster
    name = Path(str(item.fspath)).name
    if name in TIMING_FILES or item.originalname in TIMING_TESTS:
        return "timing"
    if name in SHARED_SETUP_FILES:
        return Path(name).stem
    return None


def is_slow(item: pytest.Item) -> bool:
    path = Path(str(item.fspath))
    return bool(item.get_closest_marker("slow") or cluster_of(item) or WORKFLOW_FIXTURES & set(item.fixturenames)
                or "e2e" in path.parts or path.name in PROCESS_FILES or item.originalname in PROCESS_TESTS)


def apply(items: list[pytest.Item]) -> None:
    """Mark the slow tests ``slow`` and put the tests that share a cluster or measure time in their group."""
    for item in items:
        if is_slow(item) and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)
        group = group_of(item)
        if group and not item.get_closest_marker("xdist_group"):
            item.add_marker(pytest.mark.xdist_group(group))
