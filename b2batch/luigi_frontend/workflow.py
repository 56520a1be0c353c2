"""``process()``: run a workflow locally or on batch systems, or look at it (dry run, outputs, removal)."""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import luigi
import luigi.task

from b2batch.display.report import RunReport
from b2batch.engine import Run
from b2batch.errors import B2BatchError, SettingError, StoppedBySignal
from b2batch.luigi_frontend import b2luigi_cli, batch_worker, flags, local_on_engine, task_on_node, seam
from b2batch.luigi_frontend.graph_checks import check_graph, graph
from b2batch.luigi_frontend.job_task_process import JobTaskProcess
from b2batch.luigi_frontend.jobs import RunContext, TaskJobs, TaskResult
from b2batch.luigi_frontend.task_outputs import discard_partial_outputs
from b2batch.luigi_frontend.outcomes import luigi_outcomes
from b2batch.luigi_frontend.graph_outputs import print_dry_run, print_outputs, remove_outputs, task_names, tasks_to_remove
from b2batch.luigi_frontend.graph_runner import GraphRunner
from b2batch.remote.existence import remote_checks
from b2batch.settings.runconfig import run_config
from b2batch import settings
from b2batch.settings import check_settings, get_setting, load_settings_files, set_setting, settings_snapshot

logger = logging.getLogger(__name__)


def _configure_logging(level: str) -> None:
    """b2batch's messages go to stderr beside luigi's, unless the application configured logging itself."""
    package_logger = logging.getLogger("b2batch")
    if not package_logger.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
        package_logger.addHandler(handler)
        package_logger.setLevel(getattr(logging, level, logging.INFO))


#: Signals that stop a run and cancel its jobs: Ctrl-C (SIGINT); SIGTERM from ``kill``, ``timeout``, a CI runner
#: or a wrapper passing it on; SIGHUP from a closed terminal or an ending login shell.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def _signals_stop(run: Run) -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP stop the run (:class:`StoppedBySignal`, naming the signal), and the jobs it
    started are cancelled. Only the first one raises: the same stop often comes twice (``timeout`` signals the
    command and then its whole process group, so a workflow under ``b2batch emulate`` gets SIGTERM from both),
    and a second exception in the middle of cancelling would leave jobs in the queue. A signal the process
    was started ignoring (``nohup``'s SIGHUP, SIGINT of a background job) stays ignored."""
    stopping: list[int] = []

    def handler(signum: int, frame: Any) -> None:
        run.interrupted = True  # nothing more is submitted while the run winds down
        if stopping:
            if len(stopping) == 1:
                logger.warning("%s: the run is already stopping; its jobs are being cancelled",
                               signal.Signals(signum).name)
            stopping.append(signum)
            return
        stopping.append(signum)
        raise StoppedBySignal(signum)

    try:
        previous = {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS
                    if signal.getsignal(sig) != signal.SIG_IGN}
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        for sig, old_handler in previous.items():
            signal.signal(sig, old_handler)


def _run_graph(tasks: list[Any], jobs: TaskJobs, build_params: dict[str, Any], errors: dict[str, str]) -> Any:
    """A batch run with the local scheduler: b2batch's own graph runner (linear in the graph's size);
    ``errors`` gets why tasks could not be scheduled."""
    seam.setup_logging(build_params)
    workers = local_on_engine.graph_workers(jobs.run.config, build_params["workers"])
    runner = GraphRunner(jobs, workers=workers, record=jobs.run.record, errors=errors)
    for task in tasks:
        runner.add(task)
    runner.run()
    result = runner.result()
    logging.getLogger("luigi-interface").info(result.summary_text)  # as luigi.build does
    return result


def _run_with_luigi(tasks: list[Any], jobs: TaskJobs | None, build_params: dict[str, Any]) -> Any:
    """A run driven by luigi's own worker: local runs, and batch runs with a central scheduler (luigid)."""
    walked = list(graph(tasks))
    check_graph(tasks, walked)  # the graph runner of batch runs checks the same as it goes
    if jobs is None:
        for task, _paths in walked:  # outputs a killed or failed job of an earlier --batch run left
            discard_partial_outputs(task)
        return luigi.build(tasks, **build_params)
    results: dict[str, TaskResult] = {}

    def make_process(task: Any, result_queue: Any) -> Any:
        return JobTaskProcess(jobs, task, result_queue, results) if jobs.runs_as_job(task) else None

    return luigi.build(tasks, worker_scheduler_factory=seam.LuigidFactory(make_process), **build_params)


def _names_its_batch_system(tasks: list[Any], walked: list[Any] | None = None) -> bool:
    """Whether a task of the graph has a ``batch_system`` of its own (an attribute of it or its class) other
    than ``local``: b2luigi runs such a task as a job of that system also without ``--batch``. ``walked``: the
    graph's tasks, when they were walked already."""
    try:
        graph = list(b2luigi_cli.task_iterator(tasks)) if walked is None else walked
    except Exception:  # a requires() that raises: luigi reports it when it schedules the task
        return False
    for task in graph:
        own = vars(task).get("batch_system", next((vars(k)["batch_system"] for k in type(task).__mro__
                                                   if "batch_system" in vars(k)), "local"))
        if isinstance(own, property):
            own = task.batch_system
        if own != "local":
            return True
    return False


def _as_b2luigis_local_run(jobs: TaskJobs | None) -> None:
    """What b2luigi 1.3's ``process()`` does before a run without ``--batch``: the setting ``batch_system`` is
    ``local`` from here on (``get_setting("batch_system")`` in a ``run()`` answers ``local``). The jobs of tasks
    with a ``batch_system`` of their own see the script's own settings only, as b2luigi's jobs, which start the
    script again, do: not this ``local``, nor the run's."""
    if jobs is not None:
        jobs.settings["code"] = settings_snapshot()["code"]
    set_setting("batch_system", "local")


def config_of_flags(args: Any, batch_system: str | None = None, workers: int | None = None) -> Any:
    """This run's configuration: the settings chain, with what the flags in ``args`` (:func:`flags.parse`) or
    process()'s ``batch_system`` and ``workers`` set over it. The flag is this run's, not a setting: the next process() in the
    same script starts from the settings again."""
    given = {"batch_system": args.batch_system or batch_system, "workers": args.workers or workers}
    # local_start: a task's job runs the workflow script again to rebuild its task, which a fork of this process
    # has run already (its task classes would be registered twice): every local job starts from its wrapper
    return run_config(batch_system=given["batch_system"], local_start="wrapper",
                      flags={name: value for name, value in given.items() if value is not None})


def process(task_like: Any, show_output: bool = False, dry_run: bool = False, test: bool = False,
            batch: bool = False, remove: bool = False, remove_only: bool = False, yes: bool = False,
            ignore_additional_command_line_args: bool | None = None, workers: int | None = None,
            scheduler_host: str | None = None, scheduler_port: int | None = None,
            batch_system: str | None = None, exit_on_failure: bool | None = None, **env_params: Any) -> Any:
    """Run ``task_like`` (a task or a list of tasks) with everything it requires.

    The flags of the script's command line (``--batch``, ``--test``, ``--dry-run``, ``--show-output``,
    ``--remove``, ``--remove-only``, ``--yes``, ``--workers``, ``--scheduler-host``, ``--scheduler-port``,
    ``--batch-system``) add to the arguments. Other flags are left to the script; one that its argparse did
    not take gets a warning (none with ``ignore_additional_command_line_args=True``, an error with ``False``),
    one close to a flag of b2batch's stops the run with a "did you mean". In a job, only the job's own task runs and the process exits.
    A summary of the run goes to stderr at its end (with ``--batch`` also a timeline and a report in
    ``log_dir``). When a task failed (or luigi could not schedule or run everything) the script exits with
    status 1, unless ``exit_on_failure=False`` (or the setting ``exit_on_failure`` is false): then, as in
    b2luigi, luigi's run result is returned either way. ``--dry-run`` exits 1 when some task would run and 0
    when all is complete. b2luigi 1.3's ``auto_confirm`` is ``yes``; ``remove`` and ``remove_only`` also take task
    class names (as ``--remove TASK ...`` does) and ``keep_tasks`` the classes to keep (``--keep``); with
    ``batch_runner=True`` (b2luigi's ``batch-runner`` command) only the first task runs, here, as b2luigi's batch
    worker runs it, and so does the task of ``--task-id`` with ``--batch-runner`` (the command of b2luigi's
    executable wrapper; see :mod:`.batch_worker`); ``progress_tui=True`` (or ``--tui``) writes the run's live
    state for ``b2batch monitor`` (as the setting ``live_state`` does) and prints how to follow it.
    """
    extras = _Extras.take(env_params)
    yes = yes or extras.yes
    spec = task_on_node.active_spec()
    if spec is not None:
        sys.exit(task_on_node.run_spec(spec))
    _load_settings()
    _once_per_script()
    tasks = list(task_like) if isinstance(task_like, (list, tuple, set)) else [task_like]
    if extras.runs_first_task:  # the task was made from its class and parameters: no command line to read
        batch_worker.run_here(tasks[0])
        return None
    args, rest = flags.parse(sys.argv[1:], flags.script_flags(sys._getframe(1)), ignore_additional_command_line_args)
    context = RunContext.of_main(rest) if extras.job_script is None else RunContext(script=str(extras.job_script),
                                                                                       argv=rest)
    test = bool(args.test or test)
    batch = bool(args.batch or batch) and not test
    as_b2luigi = bool(get_setting("b2luigi_texts"))  # b2luigi's texts, choices and exit statuses (its profile)
    with remote_checks():  # remote outputs: one listing per result folder, a clear error if unreachable
        if _looks_or_removes(tasks, args, as_b2luigi, test, show_output=show_output, dry_run=dry_run,
                             remove=remove, remove_only=remove_only, yes=yes, keep=extras.keep_tasks):
            return None
    build_params = _build_params(args, test, workers, scheduler_host, scheduler_port, env_params)
    _configure_logging(build_params["log_level"])
    on_engine = local_on_engine.goes_through_engine(tasks, context.script, batch=batch, test=test,
                                                    enabled=bool(get_setting("local_runs_on_engine")),
                                                    build_params=build_params,
                                                    names_own_system=_names_its_batch_system)
    run, jobs = _make_run(tasks, args, context, batch=batch, test=test, batch_system=batch_system,
                          workers=workers, retry_failed=extras.retry_failed, as_b2luigi=as_b2luigi,
                          on_engine=build_params["workers"] if on_engine else 0)
    if exit_on_failure is None:
        exit_on_failure = bool(get_setting("exit_on_failure"))
    report = _report(run, jobs, context, batch=batch, test=test, exit_on_failure=exit_on_failure,
                     tui=extras.progress_tui or bool(getattr(args, "tui", False)), on_engine=on_engine)
    _execute(tasks, run, jobs, report, batch or on_engine, build_params)
    if report.failed and exit_on_failure:
        sys.exit(1)
    return report.result if get_setting("process_returns_result") else None


@dataclass
class _Extras:
    """process()'s keyword arguments that are no luigi parameters (b2luigi's and b2batch's own)."""

    yes: bool  # b2luigi 1.3's auto_confirm
    keep_tasks: list[str]
    retry_failed: bool  # --retry-failed: poison tasks go again
    runs_first_task: bool  # batch_runner=True: b2luigi's batch-runner command
    progress_tui: bool
    job_script: Any  # what jobs run again instead of __main__ (b2luigi test)

    @classmethod
    def take(cls, env_params: dict[str, Any]) -> _Extras:
        """Take them out of ``env_params``; the rest goes to luigi."""
        return cls(yes=bool(env_params.pop("auto_confirm", False)),
                   keep_tasks=task_names(env_params.pop("keep_tasks", None)),
                   retry_failed=bool(env_params.pop("retry_failed", False)),
                   runs_first_task=bool(env_params.pop("batch_runner", False)),
                   progress_tui=bool(env_params.pop("progress_tui", False)),
                   job_script=env_params.pop("_job_script", None))


def _load_settings() -> None:
    """Read the settings files and check the settings: a broken settings.json or a value of the wrong kind
    stops the run here, with one message."""
    try:
        load_settings_files()
        check_settings()
    except SettingError as e:
        sys.exit(f"ERROR: {e}")


def _once_per_script() -> None:
    """b2luigi's rule (the setting process_once): one process() per script."""
    if not get_setting("process_once"):
        return
    # The mark is the settings store's (the script's), not a setting: it shows in no get_setting() and travels in
    # no job's settings.
    script = settings.store()
    if script.process_called:
        raise RuntimeError("process() was called a second time in this script; a workflow written against "
                           "b2luigi may call it once (the setting process_once). Pass all root tasks to one "
                           "call, process([task_a, task_b]), or require them from one WrapperTask.")
    script.process_called = True


def _looks_or_removes(tasks: list[Any], args: Any, as_b2luigi: bool, test: bool, *, show_output: bool,
                      dry_run: bool, remove: Any, remove_only: Any, yes: bool, keep: list[str]) -> bool:
    """Show the outputs, make a dry run (which exits), run one task as b2luigi's batch worker, or remove
    outputs; True when that was all the call asked for."""
    if args.show_output or show_output:
        (b2luigi_cli.show_outputs if as_b2luigi else print_outputs)(tasks)
        return True
    if args.dry_run or dry_run:
        if as_b2luigi:
            b2luigi_cli.dry_run(tasks)
        sys.exit(1 if print_dry_run(tasks) else 0)
    if getattr(args, "batch_runner", False) and not test:  # b2luigi's flag, after --test as there
        batch_worker.run_task_of_id(tasks, args.task_id)
        return True
    keep = list(args.keep or []) + keep
    if as_b2luigi and (args.remove or remove or args.remove_only or remove_only):
        only = not (args.remove or remove)  # b2luigi: --remove wins over --remove-only
        b2luigi_cli.remove(tasks, task_names(args.remove or remove or args.remove_only or remove_only), only,
                           yes=bool(args.yes or yes), keep=keep)
    # The flags: None (not given), or the names given ([]: the root tasks). The arguments: anything false
    # (False, None, b2luigi's default []) says no, True the root tasks, names those classes.
    removing = [r for r in (args.remove_only, args.remove) if r is not None]
    removing += [r for r in (remove_only, remove) if r]
    if removing:
        chosen = tasks_to_remove(tasks, [n for r in removing for n in task_names(r)], keep)
        remove_outputs(chosen, ask=not (args.yes or yes))
        if args.remove_only is not None or remove_only:
            return True
    return False


def _build_params(args: Any, test: bool, workers: int | None, scheduler_host: str | None,
                  scheduler_port: int | None, env_params: dict[str, Any]) -> dict[str, Any]:
    """luigi's ``build`` parameters: workers, the scheduler (local unless a host or port is given), log level."""
    host = args.scheduler_host or scheduler_host
    port = args.scheduler_port or scheduler_port
    params: dict[str, Any] = {
        "workers": 1 if test else (args.workers or workers or get_setting("workers")),
        "detailed_summary": True,
        **env_params,
    }
    if host or port:
        params.update(local_scheduler=False, scheduler_host=host or "localhost", scheduler_port=port or 8082)
    else:
        params.setdefault("local_scheduler", True)
    params.setdefault("log_level", "DEBUG" if test else "INFO")
    return params


def _make_run(tasks: list[Any], args: Any, context: RunContext, *, batch: bool, test: bool, batch_system: str | None,
              workers: int | None, retry_failed: bool, as_b2luigi: bool,
              on_engine: int = 0) -> tuple[Run, TaskJobs | None]:
    """The engine run with the run's configuration, and the tasks' jobs when tasks go to batch jobs;
    ``on_engine``: the workers of a run without --batch that goes through the engine (0: it does not)."""
    config = config_of_flags(args, batch_system, workers)
    if on_engine:
        shaped = bool(get_setting("pilot_jobs")) or int(get_setting("tasks_per_job")) > 1
        run = Run(config=local_on_engine.engine_config(config, on_engine, shaped))
        jobs = TaskJobs(run, context)
        jobs.events_in_steering = True
        return run, jobs
    local_sends_jobs = (not batch and not test and get_setting("local_runs_send_jobs")
                        and _names_its_batch_system(tasks))
    if local_sends_jobs:  # as b2luigi: the others run here, a task's own attribute wins
        config = config.replace(batch_system="local")
    run = Run(config=config)
    jobs = TaskJobs(run, context) if (batch or local_sends_jobs) else None
    if as_b2luigi and not batch and not test:
        _as_b2luigis_local_run(jobs)
    if jobs is not None:
        jobs.retry_failed = retry_failed or bool(getattr(args, "retry_failed", False))
    return run, jobs


def _report(run: Run, jobs: TaskJobs | None, context: RunContext, *, batch: bool, test: bool,
            exit_on_failure: bool, tui: bool, on_engine: bool = False) -> RunReport:
    """The run's report (summary, timeline, JSON and HTML), with the live state for ``b2batch monitor`` when
    asked for (``--tui``, ``progress_tui=True`` or the setting ``live_state``)."""
    from b2batch.jobscript import base_folder

    log_folder = base_folder.resolve(get_setting("log_dir"))  # the timeline and reports go there (batch runs)
    live_folder = None
    if jobs is not None and (tui or get_setting("live_state")):
        live_folder = log_folder
        if tui:
            print(f"b2batch: follow this run from any terminal with: b2batch monitor {live_folder}",
                  file=sys.stderr, flush=True)
    mode = "batch" if batch else "test" if test else "local-jobs" if on_engine else "local"
    return RunReport(run.record, batch=batch or on_engine, mode=mode, script=context.script, argv=context.argv,
                     exits_on_failure=exit_on_failure, summarise=bool(get_setting("run_summary")),
                     log_folder=log_folder, live_folder=live_folder, live_info={"tag": run.tag})


def _execute(tasks: list[Any], run: Run, jobs: TaskJobs | None, report: RunReport, batch: bool,
             build_params: dict[str, Any]) -> None:
    """Run the tasks (b2batch's graph runner for a batch run with the local scheduler, else luigi's workers),
    stopping on signals; an error or a stop signal exits with its message or status after the summary."""
    errors: dict[str, str] = {}
    try:
        with _signals_stop(run), report:
            try:
                if batch and build_params["local_scheduler"]:
                    report.result = _run_graph(tasks, jobs, build_params, errors)  # type: ignore[arg-type]
                else:
                    report.result = _run_with_luigi(tasks, jobs, build_params)
            except KeyboardInterrupt as stop:
                killed = run.interrupt()
                what = stop.signal_name if isinstance(stop, StoppedBySignal) else "SIGINT (Ctrl-C)"
                logger.error("Interrupted by %s: killed %d running job(s)%s", what, len(killed),
                             (": " + ", ".join(killed)) if killed else "")
                raise
            except B2BatchError:  # e.g. an unknown batch_system: the run stops at once
                killed = run.interrupt()
                if killed:
                    logger.error("Stopped by an error: killed %d running job(s): %s", len(killed),
                                 ", ".join(killed))
                raise
            finally:
                run.close()
                report.outcomes_of_tasks = luigi_outcomes(report.result, batch, errors, run.config.batch_system)
                if jobs is not None:
                    report.outcomes_of_tasks.policies = jobs.policies
    except B2BatchError as e:
        sys.exit(f"ERROR: {e}")  # the message once, without a traceback: it says what to fix
    except KeyboardInterrupt as stop:  # the summary said what was stopped; no traceback after it
        # 128 + the signal, as a shell shows a process the signal ended (b2luigi's status under SIGTERM or SIGHUP)
        sys.exit(128 + (stop.signum if isinstance(stop, StoppedBySignal) else signal.SIGINT))
