"""b2luigi's parameter grouping (``grouping=True``, ``max_grouping_size``) as b2luigi documents it, on b2batch's
bundles: b2luigi scripts run unchanged through the shim (``tests/workflows/b2luigi_grouping.py``), on local
jobs, the HTCondor and LSF emulators and the real Slurm and SGE. Each test counts the batch jobs the run submitted (the report's
bundle jobs, and the log folder each bundle job has) against what grouping implies."""

from __future__ import annotations

import enum
import json
import math
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import ClassVar

import pytest
from conftest import clean_env

import b2batch
from b2batch.luigi_frontend import parameters
from b2batch.engine import BatchSystem, Job, Run
from b2batch.engine.jobconfig import NO_SETTINGS
from b2batch.engine.jobstate import JobState, JobStatus
from b2batch.errors import SettingError
from b2batch.luigi_frontend.grouping import Slots

ROOT = Path(__file__).resolve().parents[3]
SHIM = ROOT / "compat" / "b2luigi-shim"
SAMPLES = "ab"


def shim_env(**extra: str) -> dict[str, str]:
    """A workflow's environment with the shim (and this checkout of b2batch) importable."""
    path = os.pathsep.join(p for p in (str(SHIM), str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return clean_env(PYTHONPATH=path, **extra)


def run(flow, system: str, *args: str, group_size: object = 4, timeout: float = 300,
        **settings: object) -> subprocess.CompletedProcess[str]:
    """Run the grouping workflow with ``--batch`` on ``system`` (the emulator for htcondor and lsf)."""
    # b2batch's layout, exit status and report under the b2luigi profile: explicit settings win over it
    b2batch_ways = {"result_dir": "results", "exit_on_failure": True, "run_summary": True}
    # b2luigi's "local" runs tasks in luigi's worker process; its "test" system is b2batch's local jobs
    jobs_on = "test" if system == "local" else system
    (flow.folder / "settings.json").write_text(json.dumps({"batch_system": jobs_on, "output_wait_timeout": 10,
                                                           **b2batch_ways, **settings}))
    env = shim_env(GROUP_SIZE=json.dumps(group_size))
    command = flow.command("--batch", *args)
    if system in ("htcondor", "lsf"):
        env.update(B2BATCH_EMULATOR_DIR=str(flow.folder / "emulator"), B2BATCH_EMULATOR_SLOTS="4")
        command = [sys.executable, "-m", "b2batch", "emulate", system, "--", *command]
    return subprocess.run(command, check=False, cwd=flow.folder, env=env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def report(folder: Path) -> dict:
    return json.loads(max((folder / "logs").glob("b2batch-run-*.report.json")).read_text())


def bundles(folder: Path) -> dict[str, list[str]]:
    """The last run's bundle jobs (as its report names them), each with the tasks it ran last."""
    found: dict[str, list[str]] = {}
    for job in report(folder)["jobs"]:
        if job["carrier"]:
            found.setdefault(job["carrier"].split(" (")[0], []).append(describe(job["params"]))
    return found


def describe(params: dict[str, str]) -> str:
    return f"{params['sample']}{params['seed']}"


def bundle_logs(folder: Path) -> set[str]:
    """Every bundle job ever submitted in the folder: each has a log folder of its own."""
    return {p.name for p in (folder / "logs" / "bundles").glob("*")}


def sims(folder: Path) -> dict[str, list[str]]:
    """Each Simulate output: sample+seed -> [sample, seed, pid, parent pid]."""
    return {f"{p.parent.parent.name[7:]}{p.parent.name[5:]}": p.read_text().split()
            for p in (folder / "results").glob("sample=*/seed=*/sim.txt")}


def assert_grouped(folder: Path, seeds: int, size: int) -> None:
    """Every Simulate ran, in ceil(seeds / size) jobs per sample, each with tasks of one sample only."""
    expected_jobs = len(SAMPLES) * math.ceil(seeds / size) if size > 1 else 0
    found = bundles(folder)
    assert len(found) == expected_jobs == len(bundle_logs(folder)), found
    for tasks in found.values():
        assert len(tasks) <= size and len({task[0] for task in tasks}) == 1, found
    outputs = sims(folder)
    assert sorted(outputs) == sorted(f"{s}{i}" for s in SAMPLES for i in range(seeds))
    assert all(line[:2] == [key[0], key[1:]] for key, line in outputs.items())
    own_jobs = [job for job in report(folder)["jobs"] if not job["carrier"]]
    assert len(own_jobs) == 1 + (len(SAMPLES) * seeds if size == 1 else 0)  # the Histogram (and ungrouped tasks)
    assert (folder / "results" / f"samples={len(SAMPLES)}" / f"seeds={seeds}" / "histogram.txt").read_text() \
        == f"{len(SAMPLES) * seeds}\n"


# --- the parameters and the groups ------------------------------------------------------------------------------

class Colour(enum.Enum):
    red = 1


NEEDS = {"ChoiceParameter": {"choices": ["x"]}, "ChoiceListParameter": {"choices": ["x"]},
         "OptionalChoiceParameter": {"choices": ["x"]}, "EnumParameter": {"enum": Colour},
         "EnumListParameter": {"enum": Colour},
         "NumericalParameter": {"var_type": int, "min_value": 0, "max_value": 9},
         "OptionalNumericalParameter": {"var_type": int, "min_value": 0, "max_value": 9}}


@pytest.mark.parametrize("name", sorted(parameters.PARAMETER_CLASSES))
def test_every_parameter_class_takes_grouping(name: str) -> None:
    param = parameters.PARAMETER_CLASSES[name](grouping=True, grouping_function=list, **NEEDS.get(name, {}))
    assert param.grouping is True
    assert parameters.PARAMETER_CLASSES[name](**NEEDS.get(name, {})).grouping is False


def test_wrong_grouping_options_are_refused() -> None:
    with pytest.raises(TypeError, match="grouping must be True or False, not 'yes'"):
        b2batch.Parameter(grouping="yes")
    with pytest.raises(TypeError, match="grouping_function must be a function"):
        b2batch.Parameter(grouping=True, grouping_function=3)


class Grouped(b2batch.Task):
    sample = b2batch.Parameter()
    seed = b2batch.IntParameter(grouping=True)
    run_number = b2batch.IntParameter(grouping=True, default=0)
    max_grouping_size = 5


class Ungrouped(b2batch.Task):
    seed = b2batch.IntParameter()
    max_grouping_size = 5


def group_of(task: b2batch.Task):
    """The task's group as its resolver (TaskJobs.group_of, which reads max_grouping_size) makes it."""
    from b2batch.engine import Run
    from b2batch.luigi_frontend.jobs import RunContext, TaskJobs

    run = Run()
    try:
        return TaskJobs(run, RunContext(script="flow.py")).group_of(task)
    finally:
        run.close()


def test_tasks_that_differ_only_in_grouped_parameters_share_a_group() -> None:
    one, two = group_of(Grouped(sample="a", seed=1)), group_of(Grouped(sample="a", seed=2, run_number=7))
    assert one == two and one.size == 5 and one.parameters == ("seed", "run_number")
    assert group_of(Grouped(sample="b", seed=1)).key != one.key
    assert group_of(Ungrouped(seed=1)) is None  # max_grouping_size without a grouped parameter: nothing to group
    b2batch.set_setting("max_grouping_size", 1)
    try:
        assert group_of(type("Default", (Grouped,), {"max_grouping_size": 1})(sample="a", seed=1)) is None
    finally:
        b2batch.clear_setting("max_grouping_size")
    with pytest.raises(SettingError, match="'max_grouping_size' is 0 .* whole number of at least 1"):
        group_of(type("Zero", (Grouped,), {"max_grouping_size": 0})(sample="a", seed=1))


def test_a_group_takes_one_worker() -> None:
    group = group_of(Grouped(sample="a", seed=1))
    slots = Slots(workers=2)
    slots.begin()
    assert all(slots.take(f"t{i}", group) for i in range(10))  # two jobs of five
    assert not slots.take("t10", group) and slots.full()
    for i in range(5):
        slots.release(f"t{i}")
    slots.begin()
    assert slots.take("t10", group) and slots.take("t11", None) is False  # a new job for the group, then full


def test_answers_of_a_shared_batch_system_reach_the_follower_they_belong_to() -> None:
    """The run's own jobs and the bundle jobs share one batch system object, which may answer for every job of
    it that changed, whoever asked: each answer must reach its own follower (else a bundle job killed while
    another bundle is followed is taken for that one, and a task's job that ends is never seen)."""

    class AnswersForAll(BatchSystem):
        name = "all"
        answer: ClassVar[dict] = {}

        def submit(self, group: list[Job]) -> None: ...

        def states(self, jobs):
            answer, AnswersForAll.answer = AnswersForAll.answer, {}
            return answer

        def cancel(self, jobs: list[Job]) -> None: ...

    run = Run()
    system = run.add_system("all", AnswersForAll)
    own, carrier = (Job(key=k, name=k, family="F", system="all", files=None, config=NO_SETTINGS)
                    for k in ("own", "carrier"))
    run.live[id(own)] = own
    AnswersForAll.answer = {own: JobState(JobStatus.successful), carrier: JobState(JobStatus.aborted)}
    assert run.states(system, [carrier], lambda job: job is carrier) == {carrier: JobState(JobStatus.aborted)}
    assert run.states(system, [own], lambda job: id(job) in run.live) == {own: JobState(JobStatus.successful)}
    assert run.states(system, [own], lambda job: True) == {}


# --- end to end on local jobs ------------------------------------------------------------------------------------

@pytest.mark.parametrize("size", [4, 1, 10])
def test_grouped_tasks_run_in_one_job_per_group(workflow, size: int) -> None:
    flow = workflow("b2luigi_grouping.py")
    done = run(flow, "local", group_size=size)
    assert done.returncode == 0, done.stderr[-4000:]
    assert_grouped(flow.folder, seeds=10, size=size)
    if size > 1:  # the tasks of one job ran in one worker process, one after another
        parents = Counter(line[3] for line in sims(flow.folder).values())
        assert sorted(parents.values()) == sorted(len(tasks) for tasks in bundles(flow.folder).values())


def test_a_group_takes_one_of_the_workers(workflow) -> None:
    """b2luigi: "only 10 workers are consumed instead of 100". Three workers run groups of four, not three tasks."""
    flow = workflow("b2luigi_grouping.py")
    done = run(flow, "local", "--workers", "3", group_size=4)
    assert done.returncode == 0, done.stderr[-4000:]
    assert_grouped(flow.folder, seeds=10, size=4)
    spans = {}
    for job in report(flow.folder)["jobs"]:
        if job["carrier"]:
            start, end = spans.get(job["carrier"], (job["started_at"], job["ended_at"]))
            spans[job["carrier"]] = (min(start, job["started_at"]), max(end, job["ended_at"]))
    assert max(sum(1 for s, e in spans.values() if s <= t < e) for t, _ in spans.values()) <= 3


def test_a_failed_task_fails_alone_and_only_it_runs_again(workflow) -> None:
    flow = workflow("b2luigi_grouping.py")
    failed = run(flow, "local", "--broken", "3", group_size=4)
    assert failed.returncode == 1, failed.stderr[-4000:]
    outcome = {describe(job["params"]): job["state"] for job in report(flow.folder)["jobs"]
               if job["params"].get("seed")}
    assert {key for key, state in outcome.items() if state == "failed"} == {"a3", "b3"}
    assert "RuntimeError: seed 3 is broken" in failed.stderr
    outputs = sims(flow.folder)
    assert sorted(outputs) == sorted(f"{s}{i}" for s in SAMPLES for i in range(10) if i != 3)
    for sample in SAMPLES:  # its group mates ran in the same job, and are done
        job = next(carrier for carrier, tasks in bundles(flow.folder).items() if f"{sample}3" in tasks)
        mates = [task for task in bundles(flow.folder)[job] if task != f"{sample}3"]
        assert mates and all(task in outputs and outcome[task] == "done" for task in mates)
    assert not list(flow.folder.glob("results/samples=*"))  # the Histogram did not run
    first_jobs = bundle_logs(flow.folder)

    again = run(flow, "local", group_size=4)
    assert again.returncode == 0, again.stderr[-4000:]
    assert sorted(sorted(tasks) for tasks in bundles(flow.folder).values()) == [["a3"], ["b3"]]
    assert len(bundle_logs(flow.folder) - first_jobs) == 2
    assert {k: v for k, v in sims(flow.folder).items() if k[1:] != "3"} == outputs  # the others did not run again


def test_a_killed_group_job_leaves_no_output_that_counts(workflow) -> None:
    flow = workflow("b2luigi_grouping.py")
    done = run(flow, "local", "--killed", "2", group_size=4, max_resubmissions=0)
    assert done.returncode == 1, done.stderr[-4000:]
    killed_worker = (flow.folder / "kills" / "2").read_text().strip()
    assert not (flow.folder / "results" / "sample=a" / "seed=2" / "sim.txt").exists()  # "partial" was removed
    outcome = {describe(job["params"]): job for job in report(flow.folder)["jobs"] if job["params"].get("seed")}
    assert outcome["a2"]["state"] == "failed" and "ended while running it" in outcome["a2"]["reason"]
    outputs = sims(flow.folder)
    before = [key for key, line in outputs.items() if line[3] == killed_worker]  # ran in the job before it
    assert before and all(outcome[key]["state"] == "done" for key in before)
    assert "a2" not in outputs and len(outputs) >= 10

    again = run(flow, "local", "--killed", "2", group_size=4)  # a run after it runs what did not end, once
    assert again.returncode == 0, again.stderr[-4000:]
    assert sorted(sims(flow.folder)) == sorted(f"{s}{i}" for s in SAMPLES for i in range(10))


def test_a_killed_group_job_has_its_tasks_run_again(workflow) -> None:
    flow = workflow("b2luigi_grouping.py")
    done = run(flow, "local", "--killed", "2", group_size=4)
    assert done.returncode == 0, done.stderr[-4000:]
    outputs = sims(flow.folder)
    killed_worker = (flow.folder / "kills" / "2").read_text().strip()
    assert outputs["a2"][3] != killed_worker  # its output is that of its second run
    resubmitted = {describe(job["params"]) for job in report(flow.folder)["jobs"] if job["resubmissions"]}
    assert "a2" in resubmitted and not any(key[0] == "b" for key in resubmitted)
    assert sorted(outputs) == sorted(f"{s}{i}" for s in SAMPLES for i in range(10))


# --- wrong settings ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("value", [0, 2.5, True, "ten"])
def test_a_wrong_max_grouping_size_stops_the_run_with_one_clear_error(workflow, value: object) -> None:
    flow = workflow("b2luigi_grouping.py")
    done = run(flow, "local", group_size=value)
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1, done.stderr[-3000:]
    assert "Task Simulate(sample=" in errors[0] and f"the setting 'max_grouping_size' is {value!r}" in errors[0]
    assert "must be a whole number of at least 1. Fix the value there" in errors[0]
    assert not bundle_logs(flow.folder) and not (flow.folder / "results").exists()  # nothing ran


def test_a_batch_process_plugin_refuses_grouped_tasks(workflow) -> None:
    flow = workflow("b2luigi_grouping.py")
    done = run(flow, "local", "--plugin", group_size=4)
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1, done.stderr[-3000:]
    assert ("its parameter 'seed' has grouping=True and the setting 'max_grouping_size' is 4, but its "
            "batch_system 'OneByOne' is a BatchProcess plugin") in errors[0]
    assert "Set max_grouping_size = 1 for Simulate (or drop grouping=True)" in errors[0]
    assert not (flow.folder / "results").exists()  # (without grouping plugins run tasks: tests/luigi/test_plugin.py)


# --- the HTCondor and LSF emulators, the real Slurm and SGE -------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("system", ["htcondor", "lsf", pytest.param("slurm", marks=pytest.mark.slurm),
                                    pytest.param("sge", marks=pytest.mark.sge)])
def test_grouping_on_batch_systems(request, workflow, system: str) -> None:
    if system in ("slurm", "sge"):
        request.getfixturevalue(system)  # the cluster must be up
    flow = workflow("b2luigi_grouping.py")
    done = run(flow, system, group_size=4, scheduler_unreachable_timeout=30)
    assert done.returncode == 0, done.stderr[-4000:]
    assert_grouped(flow.folder, seeds=10, size=4)
    assert f"{system}-bundles" in done.stderr

    (flow.folder / "results" / "sample=b" / "seed=7" / "sim.txt").unlink()
    next((flow.folder / "results").glob("samples=*/seeds=*/histogram.txt")).unlink()
    failed = run(flow, system, "--broken", "7", group_size=4)  # b7 fails; a7 ... are complete
    assert failed.returncode == 1 and "RuntimeError: seed 7 is broken" in failed.stderr, failed.stderr[-4000:]
    assert list(bundles(flow.folder).values()) == [["b7"]]
