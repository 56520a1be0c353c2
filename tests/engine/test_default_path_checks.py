"""What the default path (job_shape auto, pilots) needs beside status and cancel, without a cluster: the run
stops before submitting when its log_dir, result_dir or shell cannot work, the messages of a task cancelled
on purpose, ``b2batch monitor`` without a target, the partial-output rule of ``--dry-run``, and
``b2batch.Pool`` taking job_shape auto (pypoolparty's classes keep a job per item)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import b2batch
from b2batch.engine.jobconfig import NO_SETTINGS
from b2batch.display import report_commands
from b2batch.display.jobstates import RecordedJob, ask_batch_systems
from b2batch.display.queues import QueueViews
from b2batch.engine import Job, JobFiles
from b2batch.engine.pilots.work_queue import WorkQueue
from b2batch.errors import SettingError
from b2batch.jobscript import wrapper
from b2batch.luigi_frontend import graph_checks
from b2batch.luigi_frontend.task_outputs import outputs_counted, task_files
from b2batch.settings.resolve import resolve_job_config


class Leaf(b2batch.Task):
    n = b2batch.IntParameter()

    def output(self):
        yield self.add_to_output("leaf.txt")


@pytest.mark.parametrize("name", ["log_dir", "result_dir"])
def test_an_unwritable_folder_stops_the_run_naming_the_setting_and_the_folder(name: str) -> None:
    b2batch.set_setting(name, "/proc/no/such/folder")
    with pytest.raises(SettingError) as raised:
        graph_checks.check_writable_folders(Leaf(n=1), resolve_job_config(Leaf(n=1)))
    text = str(raised.value)
    assert text.startswith("Task Leaf(n=1): the setting ") and f"'{name}' is '/proc/no/such/folder'" in text
    assert "Set " + name + " to a folder you can write; nothing was submitted." in text
    b2batch.set_setting(name, "fine/below")
    graph_checks.check_writable_folders(Leaf(n=1), resolve_job_config(Leaf(n=1)))  # it could be made: nothing left
    assert list(Path.cwd().iterdir()) == []


def test_a_shell_that_is_no_program_stops_the_job_script() -> None:
    with pytest.raises(SettingError, match="the setting 'shell' is 'zsh9', which is no program on this host's PATH"):
        wrapper._check_shell("Leaf(n=1)", "zsh9")
    wrapper._check_shell("Leaf(n=1)", "bash")


def test_a_task_cancelled_on_purpose_says_so_instead_of_a_failure(tmp_path: Path) -> None:
    files = JobFiles.at(tmp_path, "Leaf", "k", tmp_path / "logs")
    files.make_folders()
    files.record_cancel("cancelled with b2batch cancel")
    job = Job(key="k", name="Leaf(n=1)", family="Leaf", system="lsf", files=files, config=NO_SETTINGS,
              params={"n": "1"})
    assert job.failure_message().splitlines()[0] == "Task Leaf (n=1) was cancelled with b2batch cancel before it ran."
    job.carrier = "pilot job 7 on lsf"
    assert job.failure_message().splitlines()[0] == ("Task Leaf (n=1) was cancelled with b2batch cancel while it ran "
                                                     "in pilot job 7 on lsf.")


def test_monitor_without_a_target_reads_the_log_dir_seen_from_here(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from b2batch.jobscript import base_folder

    monkeypatch.delenv(base_folder.BASE_DIR_VARIABLE)  # as the b2batch command: __main__ is its own file
    (tmp_path / "settings.json").write_text(json.dumps({"log_dir": "my_logs"}))
    assert report_commands.monitor_target(None) == (tmp_path / "my_logs").resolve()


def test_dry_run_does_not_count_the_outputs_a_failed_job_left(tmp_path: Path) -> None:
    task = Leaf(n=2)
    Path(task.get_output_file_name("leaf.txt")).parent.mkdir(parents=True, exist_ok=True)
    Path(task.get_output_file_name("leaf.txt")).write_text("half")
    assert task.complete() and outputs_counted(task)  # no job of b2batch made it
    files = task_files(task)
    files.make_folders()
    files.record_submission("slurm", "42")
    assert not outputs_counted(task)  # a job that has not ended: not yet
    files.exit_code.write_text("137\n")
    assert not outputs_counted(task)  # killed: partial
    files.exit_code.write_text("0\n")
    assert outputs_counted(task)


def test_a_task_in_a_pilot_queue_is_queued_or_running_never_unknown(tmp_path: Path) -> None:
    queue = WorkQueue(tmp_path / "_pilots" / "local-abc")
    queue.create()
    folders = []
    for number in range(3):
        folder = tmp_path / "Leaf" / f"k{number}"
        folder.mkdir(parents=True)
        (folder / "job.json").write_text(json.dumps({"task_family": "Leaf", "task_params": {"n": str(number)}}))
        (folder / "submission.json").write_text(json.dumps({"system": "slurm", "job_id": "", "queue": str(queue.root),
                                                            "unit": f"u{number}", "host": "elsewhere"}))
        queue.put(f"u{number}", {"key": f"k{number}"})
        folders.append(folder)
    pilot = queue.root / "jobs" / "pilot-1"
    pilot.mkdir(parents=True)
    (pilot / "submission.json").write_text(json.dumps({"system": "slurm", "job_id": "77_3", "host": "elsewhere"}))
    queue.join("pilot-1")
    assert queue.claim("pilot-1")[0] == "u0"
    queue.started("pilot-1", "u0", 1.0)
    queue.beat("pilot-1", {"worker": "pilot-1", "job_id": "77_3", "host": "node7", "started": 1.0})
    queue.finish("pilot-1", "u2", {"job_id": "77_3", "worker": "pilot-1", "started": 1.0, "ended": 2.0})
    (folders[2] / "exit_code").write_text("0\n")
    from b2batch.display.jobstates import collect

    jobs = {job.task: job for job in collect(tmp_path)}
    views = QueueViews()
    views.add_all(tmp_path)
    views.view(queue.root).workers["pilot-1"]  # the pilot's record was read
    workers = ask_batch_systems(list(jobs.values()), views)  # slurm's answer: could not ask, or not listed
    running, waiting, done = jobs["Leaf(n=0)"], jobs["Leaf(n=1)"], jobs["Leaf(n=2)"]
    assert (running.state, running.job_id, running.node, running.carrier) == ("running", "77_3", "node7", "pilot")
    assert running.detail.startswith("in pilot job 77_3 on node7 for ")
    assert waiting.state == "queued" and waiting.detail.startswith("waits for a pilot job (pilot jobs of its queue: 77_3")
    assert (done.state, done.job_id) == ("done", "77_3")
    assert [worker.job_id for worker in workers] == ["77_3"]
    assert isinstance(running, RecordedJob) and os.fspath(running.queue) == os.fspath(queue.root)


def test_pool_takes_job_shape_auto_and_pypoolparty_keeps_a_job_per_item(tmp_path: Path) -> None:
    from b2batch.engine.pilots.shaping_system import ShapingSystem
    from b2batch.pool import aliases

    with b2batch.Pool(batch_system="local", work_dir=tmp_path, verbose=False) as pool:
        assert isinstance(pool.executor.run.systems["local"], ShapingSystem)
        assert pool.map(abs, range(-40, 0), chunksize=1) == list(range(40, 0, -1))
        shapes = pool.executor.run.record.shapes
        assert shapes["map(abs)"]["shape"] == "pilots" and shapes["map(abs)"]["units"]["pilots"] >= 30, shapes
    array = aliases.SlurmArrayPool()
    assert array.settings["job_shape"] == "job_per_task"


@pytest.mark.parametrize(("state", "warned"), [("DONE", False), ("RUN", True)])
def test_a_cancel_of_jobs_that_ended_meanwhile_is_no_warning(state: str, warned: bool, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    """bkill of a job that has just finished fails ("Job has already finished"): no "Could not cancel" for it;
    one that still runs is worth the warning."""
    from b2batch.engine import NativeState, Run
    from b2batch.errors import SchedulerCommandError
    from b2batch.systems import command_runner
    from b2batch.systems.lsf import LSFSystem

    def refuse(command: list[str], **_kwargs: object) -> None:
        raise SchedulerCommandError(command, 255, "", "Job <7>: Job has already finished")

    monkeypatch.setattr(command_runner, "run_with_retries", refuse)
    system = LSFSystem(Run())
    monkeypatch.setattr(system, "query_states", lambda ids: {i: NativeState(state) for i in ids})
    job = Job(key="k", name="W(k)", family="W", system="lsf", files=JobFiles.at(tmp_path, "W", "k", tmp_path),
              config=NO_SETTINGS, job_id="7")
    system.cancel([job])
    assert ("Could not cancel lsf job(s) with bkill" in caplog.text) == warned, caplog.text


def test_the_tasks_one_after_another_in_a_pilot_stay_apart_on_the_timeline() -> None:
    """A pilot's row: tasks wide enough to see keep a bar each, a pixel apart; a thousand tiny ones merge."""
    from b2batch.display import charts

    wide = charts.Row(label="pilot job 1 on lsf", segments=[charts.Segment(3.0 * i, 3.0 * (i + 1), "done", f"t{i}")
                                                             for i in range(10)])
    svg = str(charts.timeline([wide], 0.0, 30.0))
    assert svg.count('<rect class="s-done"') == 10
    tiny = charts.Row(label="pilot job 2 on lsf", segments=[charts.Segment(0.001 * i, 0.001 * (i + 1), "done", "")
                                                             for i in range(1000)])
    assert str(charts.timeline([tiny], 0.0, 100.0)).count('<rect class="s-done"') == 1
