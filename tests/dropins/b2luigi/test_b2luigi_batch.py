"""b2luigi's batch internals through the shim (``b2luigi.batch.processes.*``, ``.workers``, ``.cache``): a user's
own ``BatchProcess`` really runs as a batch system, b2luigi's process classes write b2luigi's submit files (every
value from the settings quoted, none able to add a line) and stand for b2batch's own systems on the engine.
Where b2luigi 1.3.0 is installed (tests/peers), the same scripts run under it and the answers are compared.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest
from luigi.scheduler import DONE, FAILED
from peers import peer_python
from conftest import peer_env, shim_env

from b2batch import BatchProcess, JobStatus

WORKFLOWS = Path(__file__).resolve().parents[2] / "workflows"


def _custom_run(python: str, folder: Path, env: dict[str, str]) -> dict:
    """Run the custom-process workflow with a failing part in ``folder``; what came of it."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "flow.py"
    shutil.copy(WORKFLOWS / "b2luigi_custom_process.py", script)
    done = subprocess.run([python, str(script)], cwd=folder, env={**env, "FAIL": "1"}, capture_output=True,
                          text=True, timeout=300)
    summary = [line.strip() for line in done.stderr.splitlines() if line.startswith(("* ", "This progress"))]
    return {"code": done.returncode, "starts": sorted((folder / "calls.log").read_text().splitlines()),
            "outputs": sorted(str(p.relative_to(folder)) for p in folder.glob("n=*/part.txt")),
            "failed_logs": sorted(p.name for p in (folder / "logs" / "n=-1" / "Part").iterdir()),
            "summary": summary, "stderr": done.stderr}


def _has_custom_entry_point() -> bool:
    from importlib.metadata import entry_points

    return any(ep.name == "custom" for ep in entry_points(group="b2luigi.batch_systems"))


def test_a_custom_batch_process_runs_as_under_b2luigi(tmp_path: Path) -> None:
    if not _has_custom_entry_point():
        pytest.skip("batch_system 'custom' is the shim's entry point: pip install ./compat/b2luigi-shim")
    real = peer_python("b2luigi")
    ours = _custom_run(sys.executable, (tmp_path / "ours").resolve(), shim_env())
    theirs = _custom_run(str(real), (tmp_path / "real").resolve(), peer_env())
    assert ours["starts"] == ["start Part(n=-1)", "start Part(n=1)", "start Part(n=2)"], ours["stderr"][-3000:]
    for key in ("code", "starts", "outputs", "failed_logs", "summary"):
        assert ours[key] == theirs[key], (key, ours[key], theirs[key], ours["stderr"][-3000:])
    assert ours["outputs"] == ["n=1/part.txt", "n=2/part.txt"] and ours["code"] == 0
    assert "* 1 failed:" in ours["summary"]


def _submit_files(python: str, settings: dict, env: dict[str, str], folder: Path) -> dict:
    """Run the script from a copy in ``folder`` (its task files go next to it), its temporary folder in there."""
    folder.mkdir()
    script = shutil.copy(WORKFLOWS / "b2luigi_submit_files.py", folder)
    done = subprocess.run([python, str(script), json.dumps(settings)], env={**env, "TMPDIR": str(folder)},
                          capture_output=True, text=True, timeout=120, cwd=folder)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_submit_files_have_b2luigis_contents(tmp_path: Path) -> None:
    settings = {"job_name": "j1", "slurm_settings": {"mem": "2G", "partition": "short"},
                "htcondor_settings": {"request_memory": "2 GB", "+Project": '"belle"'}}
    ours = _submit_files(sys.executable, settings, shim_env(), tmp_path / "ours")
    assert ours["slurm"].splitlines() == [
        "#!/usr/bin/bash", "#SBATCH --output=<DIR>/stdout", "#SBATCH --error=<DIR>/stderr", "#SBATCH --mem=2G",
        "#SBATCH --partition=short", "#SBATCH --job-name=j1", "exec <DIR>/executable_wrapper.sh"]
    assert ours["htcondor"] == ["output = <DIR>/stdout", "error = <DIR>/stderr", "log = <DIR>/job.log",
                                "executable = <DIR>/executable_wrapper.sh", "request_memory = 2 GB",
                                '+Project = "belle"', "JobBatchName = j1", "queue 1"]
    assert ours == _submit_files(str(peer_python("b2luigi")), settings, peer_env(), tmp_path / "real")


def test_no_setting_adds_a_command_to_a_submit_file(tmp_path: Path) -> None:
    quoted = _submit_files(sys.executable, {"slurm_settings": {"comment": "a b; touch /tmp/x $(id)"}}, shim_env(),
                           tmp_path / "quoted")
    assert "#SBATCH --comment='a b; touch /tmp/x $(id)'" in quoted["slurm"].splitlines()
    for i, settings in enumerate(({"slurm_settings": {"comment": "x\ntouch /tmp/injected"}},
                                  {"slurm_settings": {"mem; touch /tmp/x": "2G"}}, {"job_name": "j\nqueue 5"},
                                  {"htcondor_settings": {"request_memory": "1\nexecutable = /bin/evil"}})):
        refused = _submit_files(sys.executable, settings, shim_env(), tmp_path / f"refused{i}")
        assert "ValueError" in refused.values(), (settings, refused)


# --- in this process, through the shim -----------------------------------------------------------------------

def test_b2luigis_process_classes_are_b2batchs_systems_on_the_engine(b2luigi) -> None:
    from b2luigi.batch.processes.apptainer import ApptainerProcess
    from b2luigi.batch.processes.htcondor import HTCondorProcess
    from b2luigi.batch.processes.lsf import LSFProcess
    from b2luigi.batch.processes.slurm import SlurmProcess
    from b2luigi.batch.processes.test import TestProcess

    from b2batch.engine import Run
    from b2batch.luigi_frontend.batch_process import ProcessSystem
    from b2batch.settings.runconfig import run_config
    from b2batch.systems import system_class

    for cls in (SlurmProcess, HTCondorProcess, LSFProcess, ApptainerProcess, TestProcess):
        assert issubclass(cls, b2luigi.batch.processes.BatchProcess) and issubclass(cls, BatchProcess)
        system = ProcessSystem(Run(config=run_config()), cls)
        assert type(system.inner) is system_class(cls.engine_system) and system.name == cls.name, cls


class _Reporting(BatchProcess):
    """A process whose job's status is ``answer``."""

    answer = "running"

    def start_job(self) -> None:
        pass

    def get_job_status(self):
        return JobStatus(self.answer) if self.answer in ("running", "successful", "aborted", "idle") else self.answer

    def terminate_job(self) -> None:
        pass


def test_a_process_answers_luigis_process_protocol_with_its_result() -> None:
    results: queue.Queue = queue.Queue()
    task = mock.Mock(task_id="T_1")
    process = _Reporting(task=task, scheduler=None, result_queue=results, worker_timeout=None)
    assert process.exitcode == 0 and process.is_alive() and results.empty()
    process.answer = "successful"
    assert not process.is_alive() and results.get_nowait() == ("T_1", DONE, "", [], [])
    assert not process.is_alive() and results.empty()  # the result is put once
    failing = _Reporting(task=task, scheduler=None, result_queue=results, worker_timeout=None)
    failing.answer = "aborted"
    assert not failing.is_alive() and results.get_nowait()[1] == FAILED
    odd = _Reporting(task=task, scheduler=None, result_queue=results, worker_timeout=None)
    odd.answer = "lost"
    with pytest.raises(ValueError, match="unknown job state"):
        odd.is_alive()


def test_send_job_worker_picks_b2luigis_processes(b2luigi) -> None:
    from b2luigi.batch.processes.custom import CustomProcess
    from b2luigi.batch.processes.slurm import SlurmProcess
    from b2luigi.batch.workers import BatchSystems, SendJobWorker

    worker = SendJobWorker()
    task = mock.Mock(batch_system="slurm", max_grouping_size=1)
    assert worker.detect_batch_system(task) is BatchSystems.slurm == "slurm"
    assert isinstance(worker._create_task_process(task), SlurmProcess)
    task.batch_system = "custom"
    task.process_class = _Reporting
    process = worker._create_task_process(task)
    assert isinstance(process, _Reporting) and process.task is task
    assert isinstance(CustomProcess.for_task(task), _Reporting)
    del task.process_class
    with pytest.raises(AttributeError, match="'process_class'"):
        worker._create_task_process(task)
    with pytest.raises(AttributeError, match="'process_class'"):
        CustomProcess.for_task(task)
    task.batch_system = "test"
    task.max_grouping_size = 5
    with pytest.raises(RuntimeError, match="only implemented for HTCondor, Slurm and LSF processes and not for test"):
        worker._create_task_process(task)
    task.batch_system = "nonsense"
    with pytest.raises(ValueError):
        worker.detect_batch_system(task)


def test_the_status_cache_keeps_statuses_for_the_ttl_setting(b2luigi, monkeypatch: pytest.MonkeyPatch) -> None:
    from b2luigi.batch.cache import DEFAULT_BATCH_STATUS_CACHE_TTL, BatchJobStatusCache

    class Cache(BatchJobStatusCache):
        def _ask_for_job_status(self, job_id=None):
            self.asked = getattr(self, "asked", 0) + 1

    clock = [1000.0]
    monkeypatch.setattr("b2luigi.batch.cache.time.monotonic", lambda: clock[0])
    cache = Cache()
    assert DEFAULT_BATCH_STATUS_CACHE_TTL == 120
    b2luigi.set_setting("batch_status_cache_ttl", 30)
    try:
        cache.seed_submitted([7], "PEND")
        clock[0] += 29
        assert cache[7] == "PEND" and not hasattr(cache, "asked") and cache.get(8, "none") == "none"
        clock[0] += 2
        assert 7 not in cache
        with pytest.raises(KeyError):
            cache[7]
        assert cache.asked == 2  # all jobs, then this one
        bad = Cache()
        b2luigi.set_setting("batch_status_cache_ttl", "60")
        with pytest.raises(ValueError, match="batch_status_cache_ttl must be a positive number"):
            bad.seed_submitted([1], "PEND")
    finally:
        b2luigi.clear_setting("batch_status_cache_ttl")


def test_status_queries_are_tried_four_times(b2luigi, monkeypatch: pytest.MonkeyPatch) -> None:
    from b2luigi.batch.processes.lsf import LSFJobStatusCache

    sleeps: list[float] = []
    monkeypatch.setattr("b2luigi.batch.helpers.time.sleep", sleeps.append)
    answers = [subprocess.CalledProcessError(255, ["bjobs"])] * 3 + [b'{"RECORDS": [{"JOBID": "5", "STAT": "RUN"}]}']
    with mock.patch("subprocess.check_output", side_effect=answers) as check_output:
        cache = LSFJobStatusCache()
        cache._ask_for_job_status()
    assert check_output.call_count == 4 and sleeps == [2, 6, 18] and cache.get("5") == "RUN"
    with mock.patch("subprocess.check_output", side_effect=[subprocess.CalledProcessError(1, ["bjobs"])] * 4):
        with pytest.raises(subprocess.CalledProcessError):
            LSFJobStatusCache()._ask_for_job_status()


def test_grouping_helpers(b2luigi) -> None:
    from b2luigi.batch.processes import JobStatus, aggregate_job_status, write_failed_jobs_log

    assert aggregate_job_status([]) is JobStatus.aborted
    assert aggregate_job_status([JobStatus.successful, JobStatus.aborted, JobStatus.running]) is JobStatus.running
    assert aggregate_job_status([JobStatus.successful, JobStatus.aborted]) is JobStatus.aborted
    assert aggregate_job_status([JobStatus.successful] * 2) is JobStatus.successful
    task = mock.Mock()
    task.get_log_file_dir = lambda: os.path.join(os.environ.get("TMPDIR", "/tmp"), f"h3-{os.getpid()}")
    path = write_failed_jobs_log(task, {101: "/logs/a", 103: "/logs/c"})
    try:
        assert Path(path).read_text() == "101: /logs/a\n103: /logs/c\n"
    finally:
        shutil.rmtree(os.path.dirname(path), ignore_errors=True)
