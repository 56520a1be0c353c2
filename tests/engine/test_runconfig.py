"""A run owns its configuration: the run-level settings are read once into an immutable RunConfig, two runs in
one process keep their own, and process()'s --batch-system is the run's, not a setting left behind."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from b2batch.engine import Run
from b2batch.engine.config import SETTING_FIELDS, RunConfig
from b2batch.settings.runconfig import run_config
from b2batch.settings import default_of, get_setting, set_setting
from helpers.simulated import Simulated, make_job


def test_the_defaults_of_a_run_config_are_those_of_the_settings() -> None:
    config = RunConfig()
    assert {name: getattr(config, name) for name in SETTING_FIELDS if name != "htcondor_settings"} == {
        name: default_of(name) for name in SETTING_FIELDS if name != "htcondor_settings"}
    assert dict(config.htcondor_settings) == default_of("htcondor_settings")


def test_a_run_config_is_read_once_and_cannot_change() -> None:
    set_setting("max_array_size", 3)
    set_setting("htcondor_settings", {"request_cpus": 2})
    config = run_config()
    set_setting("max_array_size", 50)
    assert config.max_array_size == 3 and get_setting("max_array_size") == 50
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.max_array_size = 9  # type: ignore[misc]
    with pytest.raises(TypeError):
        config.htcondor_settings["request_cpus"] = 4  # type: ignore[index]
    assert run_config(max_jobs_in_flight=4, poll_interval=None).max_jobs_in_flight == 4  # None: no override
    with pytest.raises(TypeError, match="max_arry_size"):
        run_config(max_arry_size=4)


def test_two_runs_in_one_process_do_not_see_each_others_configuration(tmp_path: Path) -> None:
    from b2batch.systems.local import LocalSystem
    from b2batch.systems.slurm import SlurmSystem

    set_setting("submission_window", 100.0)  # a job waits for its array to fill (or 100 s)
    set_setting("max_array_size", 3)
    set_setting("local_slots", 1)
    set_setting("max_scheduler_calls_per_second", 2.0)
    first = Run(config=run_config())
    set_setting("max_array_size", 1000)
    set_setting("local_slots", 5)
    set_setting("max_scheduler_calls_per_second", 8.0)
    second = Run(config=run_config())
    set_setting("max_array_size", 3)  # what the store says now changes neither run
    systems = [run.add_system("simulated", Simulated) for run in (first, second)]
    for number, run in enumerate((first, second)):
        for i in range(3):
            run.submit(make_job(tmp_path / str(number), f"j{i}"))
    assert systems[0].submissions == [3]  # its array (3) is full: out at once
    assert systems[1].submissions == []  # its array holds 1000: the three wait for more
    assert [LocalSystem(run).pool.slots() for run in (first, second)] == [1, 5]
    assert [SlurmSystem(run).calls.rate for run in (first, second)] == [2.0, 8.0]
    assert [run.config.max_array_size for run in (first, second)] == [3, 1000]


def test_a_throttle_given_by_a_front_end_is_its_runs_own() -> None:
    set_setting("max_jobs_in_flight", 7)
    throttled, other = Run(config=run_config(), max_in_flight=2), Run(config=run_config())
    throttled.add_system("simulated", Simulated)
    other.add_system("simulated", Simulated)
    assert throttled.submitters["simulated"].limit == 2 and other.submitters["simulated"].limit == 7
    assert get_setting("max_jobs_in_flight") == 7


SCRIPT = textwrap.dedent("""
    import json, sys
    import b2batch

    class Work(b2batch.Task):
        name = b2batch.Parameter()

        def output(self):
            yield self.add_to_output("out.txt")

        def run(self):
            with open(self.get_output_file_name("out.txt"), "w") as f:
                f.write(self.name)

    b2batch.process([Work(name="first")], batch=True, batch_system=sys.argv[1], exit_on_failure=False)
    print("AFTER", json.dumps(b2batch.get_setting("batch_system")), flush=True)
    b2batch.process([Work(name="second")], batch=True, batch_system="test", exit_on_failure=False)
    print("AFTER", json.dumps(b2batch.get_setting("batch_system")), flush=True)
""")


def test_process_batch_system_is_the_runs_and_not_left_in_the_settings(tmp_path: Path) -> None:
    (tmp_path / "work.py").write_text(SCRIPT)
    (tmp_path / "settings.json").write_text(json.dumps({"batch_system": "sge", "result_dir": "results",
                                                         "task_file_dir": "task_files"}))
    done = subprocess.run([sys.executable, "work.py", "local"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert [line for line in done.stdout.splitlines() if line.startswith("AFTER")] == ['AFTER "sge"'] * 2
    journals = {p.parent.name: json.loads(p.read_text())["system"]
                for p in (tmp_path / "task_files").rglob("submission.json")}
    assert sorted(journals.values()) == ["local", "test"], journals
    assert len(list((tmp_path / "results").rglob("out.txt"))) == 2


def test_a_front_ends_own_settings_make_its_runs_configuration(tmp_path: Path) -> None:
    from b2batch.calls.executor import Executor
    from b2batch.jobscript.wrapper import job_wrapper

    set_setting("local_slots", 7)
    with Executor("local", settings={"local_slots": 2, "max_array_size": 4}, max_in_flight=3,
                  work_dir=tmp_path / "calls") as executor:
        config = executor.run.config
        assert (config.batch_system, config.local_slots, config.max_array_size, config.max_jobs_in_flight) == (
            "local", 2, 4, 3)
        assert executor.run.systems["local"].inner.pool.slots() == 2  # inside the run's job shaping
        assert config.job_wrapper is job_wrapper  # the engine's pilots get their job scripts from here
    assert get_setting("local_slots") == 7 and get_setting("max_array_size") == 1000


ONCE = textwrap.dedent("""
    import json
    import b2batch
    from b2batch.settings import settings_snapshot

    class Done(b2batch.Task):
        def complete(self):
            return True

    b2batch.set_setting("process_once", True)
    b2batch.process([Done()], exit_on_failure=False)
    print("CODE", json.dumps(settings_snapshot()["code"]), flush=True)
    b2batch.process([Done()], exit_on_failure=False)
""")


def test_process_writes_nothing_into_the_settings_store(tmp_path: Path) -> None:
    """process_once (b2luigi's rule) is kept without a mark in the settings store: the settings set in code
    after process() are the user's own, and a second process() still raises."""
    (tmp_path / "once.py").write_text(ONCE)
    done = subprocess.run([sys.executable, "once.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert [line for line in done.stdout.splitlines() if line.startswith("CODE")] == ['CODE {"process_once": true}']
    assert done.returncode == 1 and "RuntimeError: process() was called a second time" in done.stderr, done.stderr
