"""Fault injection (issue #7, item 5): jobs killed on the node, a node daemon gone, held jobs, failing
submissions, a steering process killed or interrupted, broken settings, a broken job environment.

Each scenario checks that no output is lost (every task that should complete has its output, with the
right content) and that no job is duplicated: tests/workflows/faults_jobs.py records every run of a task
in runs/Step_<i>.txt (outside result_dir), and the scheduler (squeue, condor_q/condor_history, bjobs) is
asked how many jobs the run had. Runs on the real Slurm and Grid Engine of tests/clusters/ and on
b2batch's HTCondor and LSF emulators.
"""

from __future__ import annotations

import getpass
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable
from pathlib import Path

import psutil
import pytest
from conftest import clean_env
from helpers.clusters import need_real_cluster

from b2batch.emulators import make_bin_dir

CLUSTERS = Path(__file__).resolve().parents[1] / "clusters"
EMULATED = ("htcondor", "lsf")


def content(i: int) -> str:
    """What Step(i) of faults_jobs.py writes (kept in step with its content())."""
    return f"Step {i}\nsquare {i * i}\n"


def wait_for(condition, timeout: float, what: str, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(interval)


class Flow:
    """tests/workflows/faults_jobs.py in a folder of its own, on one batch system (emulated ones with a
    private emulator state), with settings.json, gates that hold tasks mid-run, and the runs it recorded."""

    def __init__(self, system: str, wf, **settings: object) -> None:
        self.system = system
        self.wf = wf
        self.folder = folder = wf.folder
        self.name = f"flt{uuid.uuid4().hex[:8]}"  # the job_name: tells this test's jobs from others'
        self.env = clean_env()
        if system in EMULATED:
            bin_dir = make_bin_dir(system, folder / "bin")
            self.env.update(B2BATCH_EMULATOR_DIR=str(folder / "emulator"), B2BATCH_EMULATOR_SLOTS="4",
                            PATH=f"{bin_dir}{os.pathsep}{self.env.get('PATH', '')}")
        self.base_settings = {"batch_system": system, "job_name": self.name, "poll_interval": 0.5,
                              "max_poll_interval": 2, "output_wait_timeout": 3,
                              "scheduler_unreachable_timeout": 60}
        self.settings(**settings)
        self.logs = 0

    def settings(self, **values: object) -> None:
        (self.folder / "settings.json").write_text(json.dumps({**self.base_settings, **values}, indent=1))

    # --- running the workflow --------------------------------------------------------------------------

    def run(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.wf.command(*args), check=False, cwd=self.folder, env=self.env, capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)

    def start(self, *args: str) -> Steering:
        self.logs += 1
        log = self.folder / f"steering-{self.logs}.log"
        with open(log, "w") as f:
            popen = subprocess.Popen(self.wf.command(*args), cwd=self.folder, env=self.env, text=True,
                                     stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT)
        return Steering(popen, log)

    def tool(self, *args: str) -> subprocess.CompletedProcess[str]:
        """An emulator tool or injection: ``tool("inject", "hold", "3.0")``, ``tool("condor_q", "-json")``."""
        if args[0] == "inject":
            args = ("inject", self.system, *args[1:])
        return subprocess.run([sys.executable, "-m", "b2batch.emulators", *args], check=False, env=self.env,
                              capture_output=True, text=True, timeout=60)

    # --- tasks -----------------------------------------------------------------------------------------

    def gate(self, *tasks: int) -> None:
        """Hold Step(i) after it wrote the first line of its output, until :meth:`open`."""
        (self.folder / "gates").mkdir(exist_ok=True)
        for i in tasks:
            (self.folder / "gates" / str(i)).touch()

    def open(self, *tasks: int) -> None:
        for i in tasks:
            (self.folder / "gates" / str(i)).unlink(missing_ok=True)

    def runs(self, i: int) -> list[str]:
        """What Step(i) recorded: one "start ..." line per run that began, "done ..." per run that ended."""
        path = self.folder / "runs" / f"Step_{i}.txt"
        return path.read_text().splitlines() if path.exists() else []

    def starts(self, i: int) -> int:
        return sum(line.startswith("start ") for line in self.runs(i))

    def dones(self, i: int) -> int:
        return sum(line.startswith("done ") for line in self.runs(i))

    def wait_started(self, *tasks: int, timeout: float = 90) -> None:
        wait_for(lambda: all(self.starts(i) for i in tasks), timeout, f"Step{tasks} to start")

    def output(self, i: int) -> Path:
        return self.folder / "results" / f"i={i}" / "out.txt"

    def job_folder(self, i: int) -> Path:
        (folder,) = (self.folder / "task_files" / "Step").glob(f"Step_{i}_*")
        return folder

    def job_id(self, i: int) -> str:
        """The id of the last job submitted for Step(i), from its submission record."""
        record = wait_for(lambda: list((self.folder / "task_files").glob(f"Step/Step_{i}_*/submission.json")), 60,
                          f"the submission record of Step({i})")
        return json.loads(record[0].read_text())["job_id"]

    def exit_code(self, i: int) -> str | None:
        path = self.job_folder(i) / "exit_code"
        return path.read_text().strip() if path.exists() else None

    def assert_complete_once(self, tasks: range | list[int], killed: tuple[int, ...] = ()) -> None:
        """Every task has its output with the right content, written by exactly one run, and nothing else
        in its output folder (a run killed with SIGKILL, those in ``killed``, cannot clean up after itself)."""
        for i in tasks:
            assert self.output(i).read_text() == content(i), f"Step({i}) output"
            assert self.dones(i) == 1, f"Step({i}) finished {self.dones(i)} times: {self.runs(i)}"
            if i not in killed:
                assert self.temporary_files(i) == [], f"Step({i}) left temporary files"

    def temporary_files(self, i: int) -> list[str]:
        folder = self.output(i).parent
        return sorted(p.name for p in folder.iterdir() if p.name != "out.txt") if folder.exists() else []

    # --- the scheduler's view --------------------------------------------------------------------------

    def jobs(self) -> dict[str, str]:
        """Every job of this test the batch system knows, queued, running or finished: id -> state."""
        if self.system == "slurm":
            out = subprocess.run(["squeue", "--noheader", "--array", "--states=all", "--format=%i|%j|%T",
                                  f"--user={getpass.getuser()}"], capture_output=True, text=True, check=True).stdout
            rows = (line.strip().split("|") for line in out.splitlines() if line.strip())
            return {i: s for i, j, s in rows if j.startswith(self.name + ".")}
        if self.system == "htcondor":
            jobs = {}
            for tool in ("condor_history", "condor_q"):  # the queue last: it has the current state
                out = self.tool(tool, "-json", "-attributes", "ClusterId,ProcId,JobStatus").stdout
                for ad in json.loads(out) if out.strip() else []:
                    jobs[f"{ad['ClusterId']}.{ad['ProcId']}"] = str(ad["JobStatus"])
            return jobs
        if self.system == "lsf":
            out = self.tool("bjobs", "-a", "-json", "-o", "jobid stat").stdout
            return {r["JOBID"]: r["STAT"] for r in json.loads(out)["RECORDS"] if r.get("JOBID")}
        if self.system == "sge":
            # The queue last: the current state. (A job that just left the queue may not be in the accounting
            # file yet: settled_jobs() waits for it.)
            return {**self._sge_finished_jobs(), **self._sge_live_jobs()}
        raise ValueError(self.system)

    def _sge_live_jobs(self) -> dict[str, str]:
        from xml.etree import ElementTree

        out = subprocess.run(["qstat", "-xml", "-u", getpass.getuser()], capture_output=True, text=True,
                             check=True).stdout
        jobs = {}
        for job in ElementTree.fromstring(out).iter("job_list"):
            if job.findtext("JB_name", "").startswith(self.name + "."):
                number, tasks = job.findtext("JB_job_number", "").strip(), job.findtext("tasks")
                for job_id in ([f"{number}.{t}" for t in _sge_task_numbers(tasks)] if tasks else [number]):
                    jobs[job_id] = job.findtext("state", "").strip()
        return jobs

    def _sge_finished_jobs(self) -> dict[str, str]:
        out = subprocess.run(["qacct", "-j", f"{self.name}.*"], capture_output=True, text=True, check=False).stdout
        jobs = {}
        for record in re.split(r"^=+\s*$", out, flags=re.M):
            if "jobnumber" not in record:
                continue
            fields = dict(re.findall(r"^(\w+)\s+(.*?)\s*$", record, re.M))
            task = fields.get("taskid", "undefined")
            jobs[fields["jobnumber"] + (f".{task}" if task.isdigit() else "")] = "finished"
        return jobs

    def settled_jobs(self, known: Iterable[str] = ()) -> dict[str, str]:
        """``jobs()`` once none is queued or running and each of ``known`` is on record.

        SGE writes a job's accounting record a moment after qstat stops listing it."""
        known = set(known)
        wait_for(lambda: not self.active_jobs() and known <= set(self.jobs()), 30,
                 f"the scheduler's records of {sorted(known)} with no job in the queue")
        return self.jobs()

    def active_jobs(self) -> list[str]:
        if self.system == "sge":
            return list(self._sge_live_jobs())  # whatever qstat still lists (qw, r, dr ...)
        active = {"slurm": {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "SUSPENDED"},
                  "htcondor": {"1", "2", "5", "6", "7"}, "lsf": {"PEND", "RUN", "PSUSP", "USUSP", "SSUSP"}}
        return [job for job, state in self.jobs().items() if state in active[self.system]]


def _sge_task_numbers(tasks: str) -> list[str]:
    """Array task numbers of a qstat ``tasks`` field: ``3`` or ``1-4:1`` ranges, comma separated."""
    numbers = []
    for part in tasks.split(","):
        first, _, rest = part.strip().partition("-")
        last, _, step = rest.partition(":")
        numbers += [str(k) for k in range(int(first), int(last or first) + 1, int(step or 1))]
    return numbers


class Steering:
    """A steering process started in the background, its output in a log file."""

    def __init__(self, popen: subprocess.Popen[str], log: Path) -> None:
        self.popen = popen
        self.log = log

    @property
    def output(self) -> str:
        return self.log.read_text()

    def wait_for_log(self, text: str, timeout: float = 90, count: int = 1) -> None:
        wait_for(lambda: self.output.count(text) >= count or self.popen.poll() is not None, timeout,
                 f"{count} x {text!r} in the steering log")
        assert self.output.count(text) >= count, f"the steering process ended early:\n{self.output[-4000:]}"

    def wait(self, timeout: float = 120) -> int:
        return self.popen.wait(timeout=timeout)

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait(timeout=30)


@pytest.fixture
def flows(workflow, tmp_path: Path):
    """``flows(system, **settings)``: a :class:`Flow`; its steering processes and jobs are stopped at the
    end of the test whatever happened."""
    made: list[Flow] = []

    def make(system: str, **settings: object) -> Flow:
        flow = Flow(system, workflow("faults_jobs.py", folder=tmp_path / f"flow{len(made)}"), **settings)
        made.append(flow)
        return flow

    yield make
    for flow in made:
        flow.open(*range(10))
        for process in psutil.process_iter(["cmdline"]):
            try:
                if any(str(flow.folder) in arg for arg in process.info["cmdline"] or ()) and \
                        process.pid != os.getpid():
                    process.kill()
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        if flow.system in ("slurm", "sge"):
            mine = flow.active_jobs()
            if mine:
                cancel = {"slurm": "scancel", "sge": "qdel"}[flow.system]
                subprocess.run([cancel, *mine], check=False, capture_output=True)


def job_processes(flow: Flow, i: int) -> list[psutil.Process]:
    """The node-side processes of Step(i)'s job: those whose command line names its job folder."""
    folder = str(flow.job_folder(i))
    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        try:
            if process.info["status"] != psutil.STATUS_ZOMBIE and \
                    any(folder in arg for arg in process.info["cmdline"] or ()):
                found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


# --- 1. a job killed on the node ------------------------------------------------------------------------


def kill_task_process(flow: Flow, i: int) -> None:
    """kill -9 the task's process of Step(i)'s job (the Python the wrapper started on the job spec)."""
    spec = str(flow.job_folder(i) / "job.json")
    (victim,) = [p for p in job_processes(flow, i) if spec in p.cmdline()]
    victim.send_signal(signal.SIGKILL)


@pytest.mark.parametrize("system", [pytest.param("slurm", marks=[pytest.mark.slurm, pytest.mark.slow]),
                                    pytest.param("htcondor", marks=pytest.mark.slow), "lsf"])
def test_job_killed_on_the_node_fails_cleanly_and_a_rerun_completes_only_it(system, flows, request) -> None:
    if system == "slurm":
        request.getfixturevalue("slurm")
    flow = flows(system)
    flow.gate(1)
    steering = flow.start("--n", "3")
    try:
        flow.wait_started(1)
        wait_for(lambda: flow.output(0).exists() and flow.output(2).exists(), 90, "Step 0 and 2 to finish")
        kill_task_process(flow, 1)
        assert steering.wait() == 1, steering.output[-4000:]
    finally:
        steering.kill()
    log = steering.output
    assert "Task Step (i=1) failed: job" in log and "exited with code 137" in log, log[-4000:]
    assert flow.exit_code(1) == "137"
    assert not flow.output(1).exists()
    flow.assert_complete_once([0, 2])
    assert len(flow.settled_jobs(flow.job_id(i) for i in range(3))) == 3  # one job per task

    flow.open(1)
    rerun = flow.run("--n", "3")
    assert rerun.returncode == 0, rerun.stderr[-4000:]
    assert rerun.stderr.count("submitted task Step") == 1 and "submitted task Step(i=1)" in rerun.stderr
    flow.assert_complete_once(range(3), killed=(1,))
    assert [flow.starts(i) for i in range(3)] == [1, 2, 1]
    assert len(flow.settled_jobs(flow.job_id(i) for i in range(3))) == 4


# --- 2. slurmd stopped and started again ------------------------------------------------------------------


def slurm_cluster(command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(CLUSTERS / "slurm.sh"), command], check=False, capture_output=True,
                          text=True, timeout=300)


def pids_of_runs(flow: Flow, i: int) -> list[int]:
    return [int(m) for m in re.findall(r"^start pid=(\d+)", "\n".join(flow.runs(i)), re.MULTILINE)]


@pytest.mark.slurm
@pytest.mark.slow
def test_node_daemon_stopped_and_started_again_completes_every_task_once(slurm, flows) -> None:
    """slurmd goes while two jobs run; after SlurmdTimeout the node is DOWN. Step 0's job is requeued by
    Slurm (same id, PENDING until its BeginTime); Step 1's job (--no-requeue) ends NODE_FAIL and b2batch
    submits it again. slurmd comes back, kills the job steps it left behind, and both tasks complete once.
    Slurm may start Step 0's requeued job while its credential is still revoked and kill it unstarted; b2batch
    then submits it again (below)."""
    flow = flows("slurm")
    (flow.folder / "task_settings.json").write_text(json.dumps({"1": {"no-requeue": True}}))
    flow.gate(0, 1)
    steering = flow.start("--n", "2")
    try:
        flow.wait_started(0, 1)
        first = {i: flow.job_id(i) for i in (0, 1)}
        old_pids = pids_of_runs(flow, 0) + pids_of_runs(flow, 1)
        stopped = slurm_cluster("stop-slurmd")
        assert stopped.returncode == 0, stopped.stderr
        try:
            steering.wait_for_log("slurm state NODE_FAIL", timeout=200)
        finally:
            started = slurm_cluster("start-slurmd")
        assert started.returncode == 0, started.stderr
        # slurmd, registering again, kills what the lost jobs left running; only then may the tasks go on.
        wait_for(lambda: not any(psutil.pid_exists(pid) for pid in old_pids), 60, "the old job steps to end")
        assert flow.dones(0) == flow.dones(1) == 0
        flow.open(0, 1)
        # A requeued job waits ~120 s (its BeginTime) before it runs again; let it run now.
        subprocess.run(["scontrol", "update", f"JobId={first[0]}", "StartTime=now"], check=False,
                       capture_output=True)
        assert steering.wait(timeout=180) == 0, steering.output[-4000:]
    finally:
        steering.kill()
        if slurm_cluster("status").returncode != 0:
            slurm_cluster("start-slurmd")
        wait_for(lambda: slurm_cluster("status").returncode == 0, 120, "the Slurm cluster to be healthy again")
    log = steering.output
    assert "submitting task Step(i=1) again (1 of 2)" in log
    if f"Job {first[0]}: task Step(i=0) failed on node" in log:
        # slurmd, registering again, revoked the lost job's credential; Slurm started the requeued job before
        # that expired (StartTime=now above) and killed it unstarted (FAILED, no exit code: CI BJ). The same
        # node then ended Step 1's job well, which clears the node: b2batch submits Step 0 again.
        assert "submitting task Step(i=0) again (1 of 2)" in log and flow.job_id(0) != first[0]
        assert "node failure on vm (the job ended without its wrapper writing its exit code" in log
    else:
        assert "submitting task Step(i=0) again" not in log and flow.job_id(0) == first[0]
    flow.assert_complete_once(range(2), killed=(0, 1))
    assert [flow.starts(i) for i in range(2)] == [2, 2]
    assert flow.job_id(1) != first[1]
    expected = sorted({first[0], first[1], flow.job_id(0), flow.job_id(1)})
    assert sorted(flow.settled_jobs(expected)) == sorted(expected)  # nothing else ran


# --- 3. a held job ----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_job_held_while_running_is_submitted_again_and_completes_once(flows) -> None:
    flow = flows("htcondor")
    flow.gate(0)
    steering = flow.start("--n", "2")
    try:
        flow.wait_started(0)
        held = flow.job_id(0)
        hold = flow.tool("inject", "hold", held, "--reason", "Job has gone over memory limit of 2048 megabytes")
        assert hold.returncode == 0, hold.stderr
        steering.wait_for_log("submitting task Step(i=0) again (1 of 2)")
        wait_for(lambda: flow.starts(0) == 2, 90, "the new job of Step 0 to start")
        flow.open(0)
        assert steering.wait() == 0, steering.output[-4000:]
    finally:
        steering.kill()
    assert f"Job {held}: htcondor JobStatus 5 (Held): Job has gone over memory limit" in steering.output
    flow.assert_complete_once(range(2), killed=(0,))
    assert [flow.starts(i) for i in range(2)] == [2, 1]
    jobs = flow.jobs()
    assert len(jobs) == 3 and flow.job_id(0) != held, jobs  # two tasks, one resubmission
    assert jobs[held] == "3", "the held job was not removed from the queue"


# --- 4. submissions failing, then working -------------------------------------------------------------------


@pytest.mark.parametrize("system", EMULATED)
def test_submission_failing_three_times_then_working_submits_each_task_once(system, flows) -> None:
    flow = flows(system)
    assert flow.tool("inject", "fail-submits", "3").returncode == 0
    done = flow.run("--n", "3")
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stderr.count("trying again in") == 3
    flow.assert_complete_once(range(3))
    assert [flow.starts(i) for i in range(3)] == [1, 1, 1]
    ids = {flow.job_id(i) for i in range(3)}
    assert len(ids) == 3 and sorted(flow.settled_jobs(ids)) == sorted(ids)


# --- 5. the steering process killed, then started again ---------------------------------------------------

FOLLOWING = "still queued or running from an earlier run; following it"
ATTACH_BUG = ("b2batch/systems/scheduler.py SchedulerProcess.attach: only the first re-attaching task finds its "
              "job. attach() polls with monitor.poll_if_older_than(5.0), and JobMonitor.poll_if_due keeps only "
              "the states of jobs tracked at that poll; a second task attaching within 5 s tracks its job id "
              "after the poll, finds no state, and submits its task again while the old job still runs")
HTCONDOR_ATTACH_BUG = ("b2batch/systems/htcondor.py: a restarted steering process never re-attaches: condor_q is "
                       "constrained to JobBatchName == b2b<RUN_TAG> of the new process, and condor_history lists "
                       "only finished jobs, so the running jobs of the earlier run are not seen and every task is "
                       "submitted again (and " + ATTACH_BUG.split(": ", 1)[1] + ")")


@pytest.mark.parametrize("system, n", [
    pytest.param("slurm", 1, marks=[pytest.mark.slurm, pytest.mark.slow]),
    pytest.param("lsf", 1, marks=pytest.mark.slow),
    pytest.param("slurm", 2, marks=[pytest.mark.slurm, pytest.mark.slow]),
    pytest.param("sge", 2, marks=[pytest.mark.sge, pytest.mark.slow]),
    pytest.param("lsf", 2, marks=pytest.mark.slow),
    pytest.param("htcondor", 2, marks=pytest.mark.slow),
])
def test_restarted_steering_process_follows_the_jobs_of_the_killed_one(system, n, flows, request) -> None:
    need_real_cluster(system, request)
    flow = flows(system)
    tasks = range(n)
    flow.gate(*tasks)
    first = flow.start("--n", str(n))
    try:
        flow.wait_started(*tasks)
        jobs = {i: flow.job_id(i) for i in tasks}
        first.popen.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
        second = flow.start("--n", str(n))
        try:
            wait_for(lambda: second.output.count(FOLLOWING) == n or "submitted task Step" in second.output, 90,
                     "the restarted steering process to follow or submit the tasks")
            flow.open(*tasks)
            assert second.wait() == 0, second.output[-4000:]
        finally:
            second.kill()
    finally:
        first.kill()
    for i in tasks:
        assert f"Job {jobs[i]}: task Step(i={i}) is {FOLLOWING}" in second.output, second.output[-4000:]
    assert "submitted task Step" not in second.output, second.output[-4000:]
    flow.assert_complete_once(tasks)
    assert [flow.starts(i) for i in tasks] == [1] * n
    # Grid Engine writes a finished job's accounting record a little later.
    assert sorted(flow.settled_jobs(jobs.values())) == sorted(jobs.values())  # no job was submitted again


@pytest.mark.parametrize("system", [
    pytest.param("slurm", marks=[pytest.mark.slurm, pytest.mark.slow]),
    pytest.param("sge", marks=[pytest.mark.sge, pytest.mark.slow]),
    pytest.param("lsf", marks=pytest.mark.slow),
])
def test_jobs_that_ended_between_the_kill_and_the_restart_are_not_submitted_again(system, flows, request) -> None:
    need_real_cluster(system, request)
    flow = flows(system)
    tasks = range(2)
    flow.gate(*tasks)
    first = flow.start("--n", "2")
    try:
        flow.wait_started(*tasks)
        jobs = {i: flow.job_id(i) for i in tasks}
        first.popen.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    finally:
        first.kill()
    flow.open(*tasks)  # the orphaned jobs finish before the new steering process starts
    wait_for(lambda: all(flow.exit_code(i) == "0" for i in tasks), 90, "the orphaned jobs to end")
    second = flow.start("--n", "2")
    try:
        assert second.wait() == 0, second.output[-4000:]
    finally:
        second.kill()
    assert "submitted task Step" not in second.output, second.output[-4000:]
    flow.assert_complete_once(tasks)
    assert [flow.starts(i) for i in tasks] == [1, 1]
    assert sorted(flow.settled_jobs(jobs.values())) == sorted(jobs.values())  # no job was submitted again


# --- 6. the steering process stopped with SIGTERM or Ctrl-C ------------------------------------------------


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("system", [pytest.param("slurm", marks=[pytest.mark.slurm, pytest.mark.slow]),
                                    pytest.param("sge", marks=[pytest.mark.sge, pytest.mark.slow]), "lsf"])
def test_interrupted_steering_process_cancels_its_jobs_and_leaves_no_partial_output(system, signum, flows,
                                                                                    request) -> None:
    need_real_cluster(system, request)
    flow = flows(system)
    flow.gate(0, 1)
    steering = flow.start("--n", "2")
    try:
        flow.wait_started(0, 1)
        jobs = {i: flow.job_id(i) for i in (0, 1)}
        steering.popen.send_signal(signum)
        assert steering.wait(timeout=60) != 0
    finally:
        steering.kill()
    log = steering.output
    assert f"Interrupted by {signal.Signals(signum).name}: killed 2 running job(s)" in log, log[-4000:]
    for i in (0, 1):
        assert f"{system} job {jobs[i]} ({flow.job_folder(i).name})" in log
    wait_for(lambda: not flow.active_jobs(), 30, f"the jobs to leave the queue: {flow.jobs()}")
    wait_for(lambda: not job_processes(flow, 0) and not job_processes(flow, 1), 30, "the job processes to end")
    flow.open(0, 1)
    time.sleep(1)
    for i in (0, 1):
        assert not flow.output(i).exists() and flow.dones(i) == 0 and flow.starts(i) == 1


def test_cancelled_job_leaves_no_temporary_output_behind(flows) -> None:
    flow = flows("lsf")
    flow.gate(0)
    steering = flow.start("--n", "1")
    try:
        flow.wait_started(0)
        steering.popen.send_signal(signal.SIGTERM)
        steering.wait(timeout=60)
    finally:
        steering.kill()
    wait_for(lambda: not job_processes(flow, 0), 30, "the job processes to end")
    assert not flow.output(0).exists()
    assert flow.temporary_files(0) == []


# --- 7.-9. broken settings ---------------------------------------------------------------------------------


def test_malformed_settings_file_is_one_clear_error_and_loses_no_output(flows) -> None:
    flow = flows("local")
    assert flow.run("--n", "2").returncode == 0
    settings = flow.folder / "settings.json"
    settings.write_text('{\n  "batch_system": "local",\n  \'poll_interval\': 0.5\n}\n')  # line 3: single quotes
    done = flow.run("--n", "2")
    assert done.returncode != 0
    assert done.stderr.count("is not valid JSON") == 1, done.stderr[-4000:]
    assert f"The settings file {settings} is not valid JSON" in done.stderr and "at line 3" in done.stderr
    assert "Traceback" not in done.stderr, done.stderr[-4000:]
    flow.assert_complete_once(range(2))  # the outputs of the earlier run are still there


def test_misspelt_name_in_settings_file_stops_the_run_once_with_the_valid_ones(flows) -> None:
    from b2batch.settings import SETTINGS

    flow = flows("local", pol_interval=1)
    done = flow.run("--n", "1")
    assert done.returncode == 1, done.stderr[-4000:]
    assert done.stderr.count("pol_interval") == 1 and "Traceback" not in done.stderr, done.stderr[-4000:]
    error = next(line for line in done.stderr.splitlines() if "pol_interval" in line)
    assert error.startswith(f"ERROR: In the settings file {flow.folder / 'settings.json'}: 'pol_interval' is not a "
                            f"known setting. Did you mean 'poll_interval'?"), error
    assert all(name in error for name in SETTINGS) and "(default " not in error


BATCH_SYSTEM_SETTINGS = {  # a wrong key in each system's settings, and what the error must suggest or list
    "slurm": ({"cpus-per-tsk": 2}, "Did you mean cpus-per-task"),
    "sge": ({"walltime": "01:00:00"}, "resources"),
    "lsf": ({"walltime": "60"}, "W,"),
    "htcondor": ({"request_cpu": 2}, "request_cpus"),
}


@pytest.mark.parametrize("system", [
    "slurm", "sge", "lsf",
    "htcondor",
])
def test_unknown_batch_system_setting_names_the_task_the_setting_and_valid_ones(system, flows) -> None:
    bad, hint = BATCH_SYSTEM_SETTINGS[system]
    flow = flows(system, **{f"{system}_settings": bad})
    done = flow.run("--n", "1")
    assert done.returncode == 1, done.stderr[-4000:]
    (key,) = bad
    error = next((line for line in done.stderr.splitlines() if f"{key!r} in {system}_settings" in line), None)
    assert error is not None, done.stderr[-4000:]
    assert "Task Step(i=0)" in error and hint in error
    assert "submitted task" not in done.stderr and not flow.output(0).exists()


def test_unknown_batch_system_is_one_clear_error(flows) -> None:
    flow = flows("slurmm")
    done = flow.run("--n", "2")
    assert done.returncode == 1
    assert done.stderr.count("Unknown batch_system") == 1, done.stderr[-4000:]
    assert re.search(r"ERROR: Unknown batch_system 'slurmm' of task Step\(i=\d\)\. Known ones: local, slurm, sge, "
                     r"htcondor, lsf, [a-z, ]*auto\. Fix the setting 'batch_system'", done.stderr), done.stderr[-4000:]
    assert "Traceback" not in done.stderr


# --- 10. a missing executable or a broken env_script on the node --------------------------------------------


def test_missing_executable_fails_with_127_pointing_at_the_setting(flows) -> None:
    flow = flows("lsf", executable=["/nonexistent/bin/python3"])
    done = flow.run("--n", "1")
    assert done.returncode == 1
    assert "exited with code 127; the command was not found on the node: check the setting 'executable' (now " \
           "['/nonexistent/bin/python3'])" in done.stderr, done.stderr[-4000:]
    assert flow.exit_code(0) == "127" and flow.starts(0) == 0


def test_env_script_that_exits_fails_with_3_naming_it(flows) -> None:
    (flow := flows("lsf", env_script="setup.sh")).folder.joinpath("setup.sh").write_text("echo setting up\nexit 1\n")
    done = flow.run("--n", "1")
    assert done.returncode == 1
    assert "exited with code 3; the job could not set up its environment: env_script" in done.stderr, \
        done.stderr[-4000:]
    assert f"b2batch: env_script {flow.folder / 'setup.sh'} exited (status 1) while being sourced" in done.stderr
    assert flow.exit_code(0) == "3" and flow.starts(0) == 0


@pytest.mark.slurm
def test_env_script_deleted_before_the_job_starts_fails_with_3_naming_it(slurm, flows) -> None:
    flow = flows("slurm", env_script="setup.sh", slurm_settings={"hold": True})
    (flow.folder / "setup.sh").write_text("export FROM_SETUP=1\n")
    steering = flow.start("--n", "1")
    try:
        job_id = flow.job_id(0)
        wait_for(lambda: flow.jobs().get(job_id) == "PENDING", 30, "the held job")
        (flow.folder / "setup.sh").unlink()
        subprocess.run(["scontrol", "release", job_id], check=True, capture_output=True)
        assert steering.wait() == 1
    finally:
        steering.kill()
    assert "exited with code 3; the job could not set up its environment: sourcing env_script" in steering.output
    assert f"b2batch: sourcing env_script {flow.folder / 'setup.sh'} failed" in steering.output
    assert flow.exit_code(0) == "3" and flow.starts(0) == 0
