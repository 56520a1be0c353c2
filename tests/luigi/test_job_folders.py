"""Where job folders are (``job_folder_layout``): b2batch's ``<TaskFamily>/<task_id>/`` and b2luigi's
``<parameters>/<TaskFamily>/``, and that the engine and ``b2batch status`` find the jobs of either."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from b2batch.engine.files import JobFiles, job_folders
from conftest import clean_env


def _job(folder: Path, journal: dict | None = None, exit_code: int | None = None) -> Path:
    folder.mkdir(parents=True)
    (folder / "job.json").write_text("{}")
    if journal is not None:
        (folder / "submission.json").write_text(json.dumps(journal))
    if exit_code is not None:
        (folder / "exit_code").write_text(f"{exit_code}\n")
    return folder


def test_job_folders_are_found_in_either_layout_and_not_inside_the_runs_own_folders(tmp_path: Path) -> None:
    root = tmp_path / "task_files"
    b2batch_layout = _job(root / "Part" / "Part_1_abc")
    b2luigi_layout = [_job(root / "n=1" / "Part"), _job(root / "n=1" / "m=2" / "Part"), _job(root / "Total")]
    _job(root / "Part" / "Part_1_abc" / "inner")  # inside a job folder: not a job of the task_file_dir
    _job(root / "_pilots" / "p1" / "jobs" / "k")  # a pilot's own job: not a task's
    _job(root / "arrays" / "a" / "x")
    assert job_folders(root) == sorted([b2batch_layout, *b2luigi_layout])
    assert job_folders(tmp_path / "missing") == []


def test_a_restarted_run_asks_about_the_unfinished_jobs_of_its_task_file_dir_in_b2luigis_layout(tmp_path: Path) -> None:
    root = tmp_path / "task_files"
    _job(root / "n=1" / "Part", {"system": "slurm", "job_id": "11"})
    _job(root / "n=2" / "m=3" / "Part", {"system": "slurm", "job_id": "12"})
    _job(root / "n=3" / "Part", {"system": "slurm", "job_id": "13"}, exit_code=0)  # ended: not asked about
    _job(root / "Other", {"system": "sge", "job_id": "14"})  # another batch system's
    files = JobFiles(folder=root / "n=1" / "Part", log_folder=tmp_path / "logs")
    assert sorted(files.unfinished_submissions("slurm", root)) == ["11", "12"]
    # without the task_file_dir: the folder two above (b2batch's <dir>/<family>/<key>/)
    assert sorted(files.unfinished_submissions("slurm")) == ["11", "12"]


def test_b2luigi_layout_puts_job_files_where_b2luigi_does_and_status_finds_them(workflow, tmp_path: Path) -> None:
    flow = workflow("experience.py", folder=tmp_path / "project")
    (flow.folder / "settings.json").write_text(json.dumps({"job_folder_layout": "b2luigi"}))
    assert flow.run("--batch", "--batch-system", "local", "--count", "2").returncode == 0
    assert flow.run("--batch", "--batch-system", "local", "--count", "1").returncode == 0
    root = flow.folder / "task_files"
    assert (root / "n=0" / "Part" / "executable_wrapper.sh").is_file()  # b2luigi's <parameters>/<TaskFamily>/
    assert (root / "n=1" / "Part" / "job.json").is_file() and not (root / "Part").exists()
    status = subprocess.run([sys.executable, "-m", "b2batch", "status", str(flow.script), "--json"], cwd=tmp_path,
                            env=clean_env(), capture_output=True, text=True, timeout=120)
    assert status.returncode == 0, status.stderr
    listed = {job["task"]: job["folder"] for job in json.loads(status.stdout)}
    assert listed == {"Part(n=0)": str(root / "n=0" / "Part"), "Total()": str(root / "Total")}  # the current tasks
    every = subprocess.run([sys.executable, "-m", "b2batch", "status", "--all", str(flow.script)], cwd=tmp_path,
                           env=clean_env(), capture_output=True, text=True, timeout=120)
    assert every.stdout.splitlines()[-1] == "3 job(s): 3 done", every.stdout


def test_a_pilots_own_job_asks_about_the_other_pilots_of_its_queue(tmp_path: Path) -> None:
    root = tmp_path / "task_files"
    jobs = root / "_pilots" / "local-pilots-1" / "jobs"
    _job(jobs / "p1", {"system": "slurm", "job_id": "21"})
    _job(jobs / "p2", {"system": "slurm", "job_id": "22"})
    _job(root / "n=1" / "Part", {"system": "slurm", "job_id": "11"})  # a task's: not in the pilots' queue
    files = JobFiles(folder=jobs / "p1", log_folder=tmp_path / "logs")
    assert sorted(files.unfinished_submissions("slurm", root)) == ["21", "22"]
