"""Restarts and kills of a task that writes its output directly (no on_temporary_files): whatever stopped its
job (``b2batch cancel``, the batch system's time limit, a SIGKILL of the steering process while the job goes
on writing), the half-written output never counts as complete, the rerun redoes or follows the task, and no
task runs twice where once is enough. Uses tests/workflows/faults_jobs.py and the helpers of test_faults.py.
"""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest
from test_faults import FOLLOWING, content, need_real_cluster, wait_for
from test_faults import flows  # noqa: F401 - fixture

FIRST_LINE = content(0).splitlines(keepends=True)[0]
NO_STEERING_TRACEBACK = "luigi_frontend/workflow.py"  # a traceback of the steering process passes there
CLUSTERS_AND_EMULATED = [pytest.param("slurm", marks=[pytest.mark.slurm, pytest.mark.slow]),
                         pytest.param("sge", marks=[pytest.mark.sge, pytest.mark.slow]), "lsf", "local"]


def direct(flow) -> None:
    (flow.folder / "direct").touch()


@pytest.mark.parametrize("system", CLUSTERS_AND_EMULATED)
def test_a_direct_writer_cancelled_with_b2batch_cancel_is_redone_by_the_rerun(system, flows, request) -> None:  # noqa: F811
    need_real_cluster(system, request)
    flow = flows(system)
    direct(flow)
    flow.gate(0)
    steering = flow.start("--n", "1")
    try:
        flow.wait_started(0)
        wait_for(lambda: flow.output(0).exists() and flow.output(0).read_text() == FIRST_LINE, 60,
                 "the first half of the output")
        cancel = subprocess.run([sys.executable, "-m", "b2batch", "cancel", "faults_jobs.py", "--yes"],
                                cwd=flow.folder, env=flow.env, capture_output=True, text=True, timeout=120)
        assert cancel.returncode == 0, cancel.stdout + cancel.stderr
        assert steering.wait(timeout=120) != 0, steering.output[-4000:]
    finally:
        steering.kill()
    assert NO_STEERING_TRACEBACK not in steering.output, steering.output[-4000:]  # a job's stderr tail may have one
    assert flow.dones(0) == 0
    # A job stopped by SIGTERM says so in a line ("stopped by SIGTERM while it ran"), not with the traceback
    # of wherever the signal came (its stderr keeps that).
    assert "Error: Runtime error" not in steering.output, steering.output[-4000:]
    flow.open(0)
    rerun = flow.run("--n", "1")
    assert rerun.returncode == 0, rerun.stderr[-4000:]
    assert flow.output(0).read_text() == content(0)  # redone, not the half the cancelled job left
    assert flow.starts(0) == 2 and flow.dones(0) == 1


@pytest.mark.parametrize("system", CLUSTERS_AND_EMULATED)
def test_a_direct_writer_stopped_by_ctrl_c_is_redone_by_the_rerun(system, flows, request) -> None:  # noqa: F811
    need_real_cluster(system, request)
    flow = flows(system)
    direct(flow)
    flow.gate(0)
    steering = flow.start("--n", "1")
    try:
        flow.wait_started(0)
        wait_for(lambda: flow.output(0).exists() and flow.output(0).read_text() == FIRST_LINE, 60,
                 "the first half of the output")
        steering.popen.send_signal(signal.SIGINT)
        assert steering.wait(timeout=120) == 130, steering.output[-4000:]
    finally:
        steering.kill()
    assert "Interrupted by SIGINT: killed 1 running job(s)" in steering.output, steering.output[-4000:]
    assert NO_STEERING_TRACEBACK not in steering.output, steering.output[-4000:]
    flow.open(0)
    rerun = flow.run("--n", "1")
    assert rerun.returncode == 0, rerun.stderr[-4000:]
    assert flow.output(0).read_text() == content(0)  # redone, not the half the interrupted job left
    assert flow.starts(0) == 2 and flow.dones(0) == 1


def test_a_run_without_batch_does_not_take_the_partial_output_of_a_cancelled_job(flows) -> None:  # noqa: F811
    """The partial output a cancelled --batch job left does not count in a later run without --batch either:
    it is removed with a log line and the task runs again, in luigi's worker."""
    flow = flows("local")
    direct(flow)
    flow.gate(0)
    steering = flow.start("--n", "1")
    try:
        flow.wait_started(0)
        wait_for(lambda: flow.output(0).exists() and flow.output(0).read_text() == FIRST_LINE, 60,
                 "the first half of the output")
        cancel = subprocess.run([sys.executable, "-m", "b2batch", "cancel", "faults_jobs.py", "--yes"],
                                cwd=flow.folder, env=flow.env, capture_output=True, text=True, timeout=120)
        assert cancel.returncode == 0, cancel.stdout + cancel.stderr
        steering.wait(timeout=120)
    finally:
        steering.kill()
    assert flow.output(0).read_text() == FIRST_LINE  # the half the cancelled job left
    flow.open(0)
    rerun = flow.run("--n", "1", "--in-process")
    assert rerun.returncode == 0, rerun.stderr[-4000:]
    assert "its outputs may be partial and do not count: removed" in rerun.stderr, rerun.stderr[-4000:]
    assert flow.output(0).read_text() == content(0)
    assert flow.starts(0) == 2 and flow.dones(0) == 1


@pytest.mark.slow
@pytest.mark.slurm
def test_a_direct_writer_killed_by_the_time_limit_is_redone_by_the_rerun(slurm, flows) -> None:  # noqa: F811
    flow = flows("slurm", slurm_settings={"time": "1"})  # one minute
    direct(flow)
    flow.gate(0)
    first = flow.run("--n", "1", timeout=300)
    assert first.returncode == 1, first.stderr[-4000:]
    assert "slurm state TIMEOUT" in first.stderr, first.stderr[-4000:]  # aborted by the time limit, and says so
    assert NO_STEERING_TRACEBACK not in first.stderr, first.stderr[-4000:]
    assert flow.dones(0) == 0 and not (flow.output(0).exists() and flow.output(0).read_text() == content(0))
    flow.open(0)
    flow.settings()  # no time limit now
    rerun = flow.run("--n", "1")
    assert rerun.returncode == 0, rerun.stderr[-4000:]
    assert flow.output(0).read_text() == content(0)
    assert flow.starts(0) == 2 and flow.dones(0) == 1


@pytest.mark.parametrize("system", CLUSTERS_AND_EMULATED)
def test_an_orphaned_job_still_writing_is_followed_not_taken_as_complete(system, flows, request) -> None:  # noqa: F811
    need_real_cluster(system, request)
    flow = flows(system)
    direct(flow)
    flow.gate(0)
    first = flow.start("--n", "1")
    try:
        flow.wait_started(0)
        wait_for(lambda: flow.output(0).exists() and flow.output(0).read_text() == FIRST_LINE, 60,
                 "the first half of the output")
        first.popen.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    finally:
        first.kill()
    second = flow.start("--n", "1")
    try:
        second.wait_for_log("its outputs do not count until it has")
        assert second.popen.poll() is None, second.output[-4000:]  # not taken as complete: it waits
        flow.open(0)
        assert second.wait() == 0, second.output[-4000:]
    finally:
        second.kill()
    # followed: by the engine (the job still ran when the graph reached it), or by the completeness check until
    # it ended (the job ended first, on a loaded machine: "ended successfully ...; not submitted again")
    followed = (FOLLOWING in second.output or "following" in second.output
                or "an earlier run ended successfully and its outputs are there; not submitted again" in second.output)
    assert followed, second.output[-4000:]
    assert "submitted task Step" not in second.output, second.output[-4000:]
    assert flow.output(0).read_text() == content(0)
    assert flow.starts(0) == 1 and flow.dones(0) == 1  # the orphaned job finished it; no second job
