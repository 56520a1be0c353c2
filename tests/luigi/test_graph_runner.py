"""b2batch's graph runner on luigi graphs, with a stand-in for the jobs so that only the runner is measured:
priorities, resources, retries, dynamic requirements, luigi's events and summary, and no O(N) work per task
handed out (counted, not timed)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any, ClassVar

import luigi
import luigi.configuration
import pytest
from luigi.scheduler import DONE, FAILED, PENDING

from b2batch.engine import Run
from b2batch.luigi_frontend.jobs import TaskResult
from b2batch.luigi_frontend.task_systems import runs_as_job
from b2batch.engine.steering import Step
from b2batch.luigi_frontend.graph_runner import GraphRunner


class InstantJobs:
    """Stands in for TaskJobs: each task handed out ends at the next poll, as its ``outcome`` says."""

    def __init__(self, outcome: Any = None) -> None:
        self.run = Run(poll_pause=0.0)
        self.started: list[Any] = []
        self.running: list[Any] = []
        self.most_running = 0
        self.outcome = outcome or (lambda task: TaskResult(task, DONE))

    def system_of(self, task: Any) -> str:
        return "instant"

    def group_of(self, task: Any) -> None:
        return None  # no parameter grouping

    def config_of(self, task: Any) -> dict[str, Any]:
        return {"log_dir": None, "result_dir": None}  # no folders to check

    def runs_as_job(self, task: Any) -> bool:
        return runs_as_job(task, self.run.config.batch_system)

    def outputs_count(self, task: Any) -> bool:
        return True

    def start(self, task: Any) -> None:
        self.started.append(task)
        self.running.append(task)
        self.most_running = max(self.most_running, len(self.running))

    def ended(self, job: Any) -> None:
        raise AssertionError("the stand-in's run has no jobs")

    def results(self) -> list[TaskResult]:
        """What the graph runner takes after each of the run's polls: every task handed out ended."""
        ended, self.running = self.running, []
        results = []
        for task in ended:
            result = self.outcome(task)
            if result.status == DONE:
                Done.ids.add(task.task_id)
            results.append(result)
        return results


class Done(luigi.Task):
    """Complete once the stand-in ran it; counts its completeness checks and requirement look-ups."""

    task_namespace = "graph_runner_test"  # unique names: dynamic requirements are loaded by name
    ids: ClassVar[set[str]] = set()
    checks: ClassVar[Counter[str]] = Counter()
    lookups: ClassVar[Counter[str]] = Counter()

    def complete(self) -> bool:
        Done.checks[self.task_id] += 1
        return self.task_id in Done.ids

    def deps(self) -> list[Any]:
        Done.lookups[self.task_id] += 1
        return super().deps()

    def run(self) -> None:
        """Run by the stand-in."""


class Leaf(Done):
    i = luigi.IntParameter()


class Top(Done):
    n = luigi.IntParameter()

    def requires(self) -> Any:
        return [Leaf(i=i) for i in range(self.n)]


@pytest.fixture(autouse=True)
def clean() -> Iterator[None]:
    for counter in (Done.ids, Done.checks, Done.lookups):
        counter.clear()
    yield


@pytest.fixture
def luigi_config() -> Iterator[Any]:
    config = luigi.configuration.get_config()
    added = []

    def set_option(section: str, option: str, value: str) -> None:
        if not config.has_section(section):
            config.add_section(section)
        config.set(section, option, value)
        added.append((section, option))

    yield set_option
    for section, option in added:
        config.remove_option(section, option)


def test_a_graph_of_20000_tasks_costs_no_o_n_work_per_task_handed_out() -> None:
    n = 20_000
    jobs = InstantJobs()
    runner = GraphRunner(jobs, workers=500)
    assert runner.add(Top(n=n))
    assert runner.run()
    assert len(jobs.started) == n + 1 and jobs.started[-1] == Top(n=n)
    assert jobs.most_running == 500
    # each task looked at once when handed out, checked once for completeness, its requirements read once
    assert runner.operations == n + 1
    assert max(Done.checks.values()) == 1 and sum(Done.checks.values()) == n + 1
    assert max(Done.lookups.values()) == 1
    result = runner.result()
    assert result.status == luigi.LuigiStatusCode.SUCCESS
    assert f"Scheduled {n + 1} tasks of which" in result.summary_text


def test_a_sliced_hand_out_lets_the_run_poll_between_tasks_and_goes_on_without_a_pause() -> None:
    """A run without --batch hands out ready tasks for at most ``hand_out_slice`` seconds (one task at least), then
    the run polls and the hand-out goes on at once (step says AGAIN, not WAIT, while tasks are ready); a batch
    run (no slice) hands out every ready task at once."""
    jobs = InstantJobs()
    runner = GraphRunner(jobs, workers=10**9)
    runner.hand_out_slice = 0.0  # one task per hand-out
    assert runner.add(Top(n=5))
    runner.feed()
    assert len(jobs.started) == 1
    jobs.running = []  # still running: nothing ended at this poll
    assert runner.step(0) is Step.AGAIN
    runner.feed()
    assert len(jobs.started) == 2
    whole = InstantJobs()
    batch = GraphRunner(whole, workers=10**9)
    assert batch.hand_out_slice is None  # no events in steering: a batch run
    assert batch.add(Top(n=5))
    batch.feed()
    assert len(whole.started) == 5
    sliced = InstantJobs()
    runner = GraphRunner(sliced, workers=10**9)
    runner.hand_out_slice = 0.0
    assert runner.add(Top(n=5))
    assert runner.run()
    assert len(sliced.started) == 6 and sliced.started[-1] == Top(n=5)


class Ranked(Done):
    name = luigi.Parameter()
    rank = luigi.IntParameter(default=0)
    needs = luigi.ListParameter(default=[])

    @property
    def priority(self) -> int:
        return self.rank

    def requires(self) -> Any:
        return [Ranked(name=name) for name in self.needs]


class Ranks(luigi.WrapperTask):
    def requires(self) -> Any:
        yield Ranked(name="low", rank=1)
        yield Ranked(name="high", rank=10)
        yield Ranked(name="middle", rank=5, needs=["helper"])  # the helper runs at priority 5 too
        yield Ranked(name="urgent", rank=20, needs=["base"])


def test_ready_tasks_go_in_priority_order_and_requirements_inherit_priority() -> None:
    jobs = InstantJobs()
    runner = GraphRunner(jobs, workers=1)
    runner.add(Ranks())
    runner.run()
    names = [task.name for task in jobs.started]
    assert names == ["base", "urgent", "high", "helper", "middle", "low"]


class Heavy(Done):
    i = luigi.IntParameter()
    resources = {"licence": 1}


class ManyHeavy(luigi.WrapperTask):
    def requires(self) -> Any:
        return [Heavy(i=i) for i in range(6)] + [Leaf(i=i) for i in range(6)]


def test_resources_bound_the_tasks_that_need_them(luigi_config: Any) -> None:
    luigi_config("resources", "licence", "2")
    held: list[int] = []

    class Watching(InstantJobs):
        def results(self) -> list[TaskResult]:
            held.append(sum(1 for task in self.running if isinstance(task, Heavy)))
            return super().results()

    jobs = Watching()
    runner = GraphRunner(jobs, workers=10)
    runner.add(ManyHeavy())
    assert runner.run()
    assert max(held) == 2 and len(jobs.started) == 12


def test_a_failed_task_is_tried_again_when_the_worker_keeps_alive(luigi_config: Any) -> None:
    luigi_config("worker", "keep_alive", "true")
    luigi_config("scheduler", "retry_delay", "0.05")
    attempts: Counter[str] = Counter()

    def flaky(task: Any) -> TaskResult:
        attempts[task.task_id] += 1
        return TaskResult(task, FAILED, "broken") if attempts[task.task_id] < 3 else TaskResult(task, DONE)

    jobs = InstantJobs(flaky)
    runner = GraphRunner(jobs, workers=1)
    runner.add(Leaf(i=1))
    runner.run()
    assert attempts[Leaf(i=1).task_id] == 3
    assert runner.result().status == luigi.LuigiStatusCode.SUCCESS_WITH_RETRY


def test_without_keep_alive_a_failure_leaves_its_dependents_pending() -> None:
    jobs = InstantJobs(lambda task: TaskResult(task, FAILED if task == Leaf(i=0) else DONE, "broken"))
    runner = GraphRunner(jobs, workers=4)
    runner.add(Top(n=3))
    assert runner.run() is False
    assert Top(n=3) not in jobs.started and len(jobs.started) == 3
    result = runner.result()
    assert result.status == luigi.LuigiStatusCode.FAILED
    assert "were left pending, among these" in result.summary_text


def test_dynamic_requirements_join_the_graph() -> None:
    def dynamic(task: Any) -> TaskResult:
        if task == Top(n=0) and Leaf(i=7).task_id not in Done.ids:
            return TaskResult(task, PENDING, "", [(Leaf.__module__, Leaf.get_task_family(), {"i": "7"})])
        return TaskResult(task, DONE)

    jobs = InstantJobs(dynamic)
    runner = GraphRunner(jobs, workers=2)
    runner.add(Top(n=0))
    assert runner.run()
    assert [task.task_id for task in jobs.started] == [Top(n=0).task_id, Leaf(i=7).task_id, Top(n=0).task_id]


class Missing(luigi.ExternalTask):
    def output(self) -> Any:
        return luigi.LocalTarget("/nonexistent/b2batch")


class Raising(Done):
    def requires(self) -> Any:
        raise RuntimeError("broken requires")


class Here(Done):
    """Runs in the steering process (not a job): luigi's TaskProcess fires its events here."""

    run_local = True

    def requires(self) -> Any:
        return [Leaf(i=0)]

    def run(self) -> None:
        Done.ids.add(self.task_id)


class Events(luigi.WrapperTask):
    def requires(self) -> Any:
        return [Here(), Missing(), Raising()]


def test_luigis_events_fire_on_the_new_path() -> None:
    fired: list[tuple[str, str]] = []
    handlers = {event: (lambda *args, event=event: fired.append((event, args[0].task_family)))
                for event in (luigi.Event.DEPENDENCY_DISCOVERED, luigi.Event.DEPENDENCY_PRESENT,
                              luigi.Event.DEPENDENCY_MISSING, luigi.Event.BROKEN_TASK, luigi.Event.START,
                              luigi.Event.SUCCESS)}
    for event, handler in handlers.items():
        luigi.Task.event_handler(event)(handler)
    Done.ids.add(Leaf(i=0).task_id)
    try:
        runner = GraphRunner(InstantJobs(), workers=2)
        assert runner.add(Events()) is False  # Raising's requires() is a scheduling error
        runner.run()
    finally:
        for event, handler in handlers.items():
            luigi.Task._event_callbacks[luigi.Task][event].discard(handler)
    ns = "graph_runner_test."
    assert (luigi.Event.DEPENDENCY_DISCOVERED, "Events") in fired
    assert (luigi.Event.DEPENDENCY_PRESENT, ns + "Leaf") in fired
    assert (luigi.Event.DEPENDENCY_MISSING, "Missing") in fired
    assert (luigi.Event.BROKEN_TASK, ns + "Raising") in fired
    assert (luigi.Event.START, ns + "Here") in fired and (luigi.Event.SUCCESS, ns + "Here") in fired
    result = runner.result()
    assert result.status == luigi.LuigiStatusCode.SCHEDULING_FAILED
    assert not result.scheduling_succeeded


def test_the_run_stops_when_interrupted_from_a_signal_handler() -> None:
    """Ctrl-C raises KeyboardInterrupt in the loop; nothing more is handed out."""
    class Slow(InstantJobs):
        def results(self) -> list[TaskResult]:
            if len(self.started) >= 3:
                raise KeyboardInterrupt
            return super().results()

    jobs = Slow()
    runner = GraphRunner(jobs, workers=1)
    runner.add(Top(n=10))
    with pytest.raises(KeyboardInterrupt):
        runner.run()
    assert len(jobs.started) == 3


class Misspelt(Done):
    htcondor_setings = {"request_cpus": 2}


def test_a_misspelt_setting_on_a_task_class_stops_the_graph_before_it_is_run() -> None:
    from b2batch.errors import SettingError

    jobs = InstantJobs()
    runner = GraphRunner(jobs, workers=1)
    with pytest.raises(SettingError, match="Task class Misspelt: the attribute 'htcondor_setings' is not a setting "
                                           "b2batch knows. Did you mean 'htcondor_settings'?"):
        runner.add(Misspelt())
    assert not runner.nodes


class Writer(Done):
    def output(self) -> Any:
        return luigi.LocalTarget("/tmp/b2batch-shared-output")


class OtherWriter(Writer):
    pass


class BothWrite(luigi.WrapperTask):
    def requires(self) -> Any:
        return [Writer(), OtherWriter()]


def test_two_tasks_that_would_write_the_same_output_stop_the_run() -> None:
    from b2batch.errors import OutputPathError

    runner = GraphRunner(InstantJobs(), workers=2)
    with pytest.raises(OutputPathError, match="both declare the output /tmp/b2batch-shared-output"):
        runner.add(BothWrite())
