"""luigi tasks as engine jobs: which tasks become jobs, their job files, and what an ended job means for its
task (done, failed, or new dynamic requirements).

:class:`TaskJobs` belongs to one run. It writes a task's spec (which task the job runs, so the node side
rebuilds exactly that task without walking the graph) and its wrapper, makes the engine :class:`Job`, and
judges ended jobs: a job that succeeded still has to show its outputs on this host (shared file systems are
slow) within ``output_wait_timeout`` seconds.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from luigi.scheduler import DONE, FAILED, PENDING

from b2batch.jobscript import base_folder
from b2batch import systems
from b2batch.engine import Job, JobFiles, Run
from b2batch.errors import B2BatchError
from b2batch.luigi_frontend import b2luigi_messages, checkpoint, poison
from b2batch.luigi_frontend.batch_process import BatchProcess, ProcessSystem
from b2batch.luigi_frontend.task_systems import module_file
from b2batch.luigi_frontend.grouping import Group
from b2batch.luigi_frontend.task_outputs import last_job, missing_outputs, remove_outputs, task_files
from b2batch.luigi_frontend.task_settings import TaskSettings
from b2batch.engine.jobconfig import JobConfig
from b2batch.settings import get_setting, settings_snapshot
from b2batch.settings.resolve import resolve_job_config, resolve_setting


logger = logging.getLogger(__name__)


@dataclass
class RunContext:
    """What a job needs to know of the steering process: the workflow script and its own arguments."""

    script: str | None = None
    argv: list[str] = field(default_factory=list)

    @classmethod
    def of_main(cls, argv: list[str] | None = None) -> RunContext:
        main_file = getattr(sys.modules.get("__main__"), "__file__", None)
        return cls(script=str(Path(main_file).resolve()) if main_file else None, argv=list(argv or []))


@dataclass
class TaskResult:
    """What became of a task: luigi's status (DONE, FAILED or PENDING), why, and new requirements."""

    task: Any
    status: str
    explanation: str = ""
    new_deps: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)


def _on_this_host(job: Job) -> bool:
    """Whether the job ran on this machine (local jobs, or pilots and bundles of local jobs)."""
    return job.system.partition("-")[0] in ("local", "test")


def task_wrapper(task: Any, job_files: JobFiles, flags: dict[str, Any] | None = None) -> str:
    """The executable wrapper of ``task``'s job, with the task's settings resolved as a run with the flags
    ``flags`` (``RunConfig.flags``; none: a run without flags) does (for tools and tests; a run writes it with
    :meth:`TaskJobs.write_files`)."""
    from b2batch.jobscript import wrapper  # rendering needs jinja: imported only on the steering side

    config = resolve_job_config(task, flags)
    return wrapper.render_job_wrapper(task, task.task_id, config, job_files,
                                      [*wrapper.executable_of(task, config), str(wrapper.ENTRY_POINT),
                                       job_files.path_of("spec")],
                                      checkpoint=callable(getattr(task, "checkpoint", None)))


class TaskJobs:
    """The jobs of one run's luigi tasks."""

    def __init__(self, run: Run, context: RunContext) -> None:
        self.run = run
        self.context = context
        self.jobs: dict[str, Job] = {}  # by task id, while the task is a job
        self._awaiting_outputs: dict[str, float] = {}  # task id -> deadline
        self._results: list[TaskResult] = []
        self._units: dict[str, dict[str, Any]] = {}  # task module -> how a pilot runs its tasks (_unit_of)
        #: The settings the tasks' own code sees in their jobs (get_setting in a run(); b2batch's code that works
        #: for a job there reads its JobConfig, spec["config"]): set_setting and the settings files, taken once
        #: for the run's jobs, and the run's flags (--batch-system, --workers) and batch_system, which live in the
        #: run's configuration, not in the store: a task's get_setting("workers") in its job answered the flag's
        #: value when process() still set it, and does so still (see docs/architecture.md, "Settings on the node").
        self.settings = settings_snapshot()
        self.settings["code"].update(run.config.flags)
        if isinstance(run.config.batch_system, str):
            self.settings["code"]["batch_system"] = run.config.batch_system
        self._system_names: dict[str, str] = {}
        self._followed: set[str] = set()  # tasks whose earlier job has not ended, said once each
        #: --retry-failed: poison tasks (max_task_failures) of this run are submitted again, their counts reset.
        self.retry_failed = False
        #: A run without --batch on the engine (:mod:`.local_on_engine`): the tasks' events fire in the steering
        #: process, not in their jobs.
        self.events_in_steering = False
        #: What the self-healing policies did in this run, by policy, for the summary and the report.
        self.policies: dict[str, list[dict[str, Any]]] = {}
        #: Tasks whose failure this run counted, or whose count it looked at: once per run each (luigi's retries
        #: within a run, keep_alive and retry_count, are not held back and count once).
        self._counted: set[str] = set()
        self._looked_at: set[str] = set()
        #: Each task's settings as its job has them (:mod:`.task_settings`), resolved once.
        self.resolver = TaskSettings(run)
        self._end_earlier_pilots()

    def _end_earlier_pilots(self) -> None:
        """The pilot jobs of earlier runs whose steering process is gone end now, also when this run then
        finds everything complete (a run that needs their queue again follows those still running)."""
        from b2batch.engine.pilots.orphans import end_earlier_pilots

        # The run's task_file_dir, as the resolver gives it to tasks without one of their own (the pilots of tasks
        # with their own task_file_dir are there, and not looked for, as before).
        folder = base_folder.resolve(str(resolve_setting(None, "task_file_dir", self.run.config.flags)))
        if not (folder / "_pilots").is_dir():
            return

        def system_of(name: str) -> Any:
            try:
                return systems.system_class(name)(self.run)  # not the run's own: that one may shape its units
            except B2BatchError as e:
                logger.warning("Cannot end the pilot jobs of an earlier run on %s: %s", name, e)
                return None

        ended = end_earlier_pilots(folder, system_of)
        if ended:
            logger.warning("Ended %d pilot job(s) of an earlier run whose steering process is gone: %s", len(ended),
                           "; ".join(ended))

    def group_of(self, task: Any) -> Group | None:
        return self.resolver.group_of(task)

    def config_of(self, task: Any) -> JobConfig:
        return self.resolver.config_of(task)

    def job_shape_of(self, task: Any) -> str:
        return self.resolver.job_shape_of(task)

    def batch_system_of(self, task: Any) -> Any:
        return self.resolver.batch_system_of(task)

    def runs_as_job(self, task: Any) -> bool:
        return self.resolver.runs_as_job(task)

    def system_of(self, task: Any) -> str:
        """The name of the task's batch system, which the run then has (looked up once per task)."""
        name = self._system_names.get(task.task_id)
        if name is None:
            name = self._system_names[task.task_id] = self._system_of(task)
        return name

    def _system_of(self, task: Any) -> str:
        def adapt(cls: type) -> Any:
            if issubclass(cls, BatchProcess):
                return cls.system_name or cls.__name__, lambda run: ProcessSystem(run, cls)
            return None

        return systems.add_to_run(self.run, self.batch_system_of(task), task, self.config_of(task),
                                  adapt, shaping=True)

    def make(self, task: Any) -> Job:
        """The engine job of ``task`` (its batch system is added to the run; an unknown one is an error that
        stops the run)."""
        system = self.system_of(task)
        files = task_files(task)
        group = self.group_of(task)
        return Job(key=task.task_id, name=str(task), family=task.task_family, system=system,
                   files=files, config=self.config_of(task), bundle=group.key if group else None,
                   params=task.to_str_params(only_significant=True), payload=task,
                   # A task that checkpoints runs as its own job: its wrapper passes the batch system's warning on.
                   unit=None if checkpoint.can_checkpoint(task) else self._unit_of(task.task_module),
                   bootstrap=self.bootstrap, settings_key=self.resolver.settings_key(task))

    def _unit_of(self, module: str) -> dict[str, Any]:
        """How a pilot or bundle runs a task of ``module`` (its spec file is the call's argument): one dict for
        all tasks of the module, which nobody changes."""
        unit = self._units.get(module)
        if unit is None:
            unit = self._units[module] = {"call": "b2batch.luigi_frontend.task_on_node:run_unit", "job_files": ["spec"],
                                          "preload": [] if module == "__main__" or module_file(module) else [module]}
        return unit

    @functools.cached_property
    def bootstrap(self) -> dict[str, Any]:
        """What a pilot or bundle job loads before it runs tasks: the workflow script as it is now (an edited
        script gets new pilots), the base folder and the settings."""
        script = self.context.script
        try:
            stamp = list(os.stat(script)[7:9]) if script else None  # size and mtime
        except OSError:
            stamp = None
        return {"frontend": "luigi", "script": script, "script_stamp": stamp, "argv": self.context.argv,
                "base_dir": str(base_folder.base_dir()), "settings": self.settings}

    def write_files(self, job: Job) -> None:
        """Write the job's spec and wrapper (a bad setting raises its SettingError)."""
        from b2batch.jobscript import wrapper  # rendering needs jinja: imported only on the steering side

        task, files = job.payload, job.files
        files.make_folders()
        spec = {"task_module": task.task_module, "task_module_file": module_file(task.task_module),
                "task_family": task.task_family, "task_id": task.task_id, "task_params": task.to_str_params(),
                "script": self.context.script, "argv": self.context.argv, "base_dir": str(base_folder.base_dir()),
                "settings": self.settings, "config": job.config.as_dict(), "result_file": files.path_of("result"),
                "events_in_steering": self.events_in_steering}
        wrapper.write_job_script(files, task, task.task_id, job.config, spec=spec,
                                 wrapper=self.run.needs_job_script(job),  # pilots and bundles have their own
                                 checkpoint=callable(getattr(task, "checkpoint", None)))

    def start(self, task: Any) -> None:
        """Submit ``task`` as a job (a job whose files cannot be written fails at the next poll). A task whose
        job of an earlier run ended since the graph was walked is not submitted again when its outputs are
        there; one whose earlier job failed says so before it is submitted again."""
        job = self.make(task)
        self.jobs[task.task_id] = job
        job.files.make_folders()
        if job.files.fresh:  # a job folder made just now holds no earlier job and no failure count to read
            self._looked_at.add(task.task_id)
        elif self._ended_earlier(job) or self._held_back(job):
            return
        if get_setting("b2luigi_texts"):  # b2luigi's log line, under its profile
            b2luigi_messages.log_batch_process_start(self.batch_system_of(task), task)
        try:
            self.write_files(job)
        except B2BatchError as e:
            job.not_submitted = True
            self.run.record.update(job, "waiting")
            self._end(job, FAILED, f"Task {task} could not be submitted to {job.system}: {e}")
            return
        self.run.submit(job)

    def _held_back(self, job: Job) -> bool:
        """Whether the job's task is a poison task (it failed max_task_failures times in earlier runs): it then
        fails without a job, saying so with its last error; with --retry-failed its count starts again."""
        task = job.payload
        if task.task_id in self._looked_at:
            return False
        self._looked_at.add(task.task_id)
        if self.retry_failed:
            earlier = poison.clear(job.files.folder)
            if earlier is not None:
                logger.info("Task %s: --retry-failed forgets its %d earlier failure(s)", task, earlier.count)
            return False
        held = poison.held_back(task, job.files.folder, get_setting("max_task_failures", task=task))
        if held is None:
            return False
        failures, message = held
        self.policies.setdefault("poison_tasks", []).append({
            "task_id": task.task_id, "task": str(task), "failures": failures.count, "last_error": failures.last_error,
            "log": failures.log, "text": f"{task}: not submitted, failed {failures.count} time(s) in earlier runs; "
                                         f"last error: {failures.last_error} (log: {failures.log})"})
        job.not_submitted = True
        self.run.record.update(job, "waiting")
        self._end(job, FAILED, message)
        return True

    def _ended_earlier(self, job: Job) -> bool:
        """Whether an earlier run's job of this task ended successfully with the outputs there (the task is
        then done); logs an earlier job that failed."""
        last = last_job(job.files)
        if last is None or last[1] is None:
            return False  # no earlier job, or one that may still run (the run follows it)
        task, (earlier, ended) = job.payload, last
        job.earlier_ended = True  # it is not followed: what is submitted now is a new job
        if ended.exit_code == 0 and task.complete():
            logger.info("Task %s: its %s of an earlier run ended successfully and its outputs are there; not "
                        "submitted again", task, earlier)
            self.jobs.pop(task.task_id, None)
            self.run.record.settle(task.task_id)
            self._results.append(TaskResult(task, DONE))
            return True
        if ended.cancelled:  # not a failure: it was stopped on purpose
            logger.info("Task %s: its earlier %s was %s; submitting it again", task, earlier, ended.cancelled)
        elif ended.exit_code != 0:
            logger.warning("Task %s: its earlier %s failed with exit code %s (logs: %s); submitting it again", task,
                           earlier, ended.exit_code, job.files.stderr)
        return False

    def outputs_count(self, task: Any) -> bool:
        """Whether the outputs of a task that looks complete count. They do not while a job of an earlier
        run of the task has not ended (it is followed instead), nor when the task's last job did not end
        successfully (killed, cancelled, timed out or failed: its outputs may be partial, so they are
        removed, with a log line, and the task runs again)."""
        last = last_job(task_files(task))
        if last is None:
            return True  # no job of b2batch made them (or a job of an older layout)
        earlier, ended = last
        if ended is None:
            if task.task_id not in self._followed:
                self._followed.add(task.task_id)
                logger.warning("Task %s: its %s of an earlier run has not ended; its outputs do not count until "
                               "it has (it is followed)", task, earlier)
            return False
        if ended.exit_code == 0:
            return True
        removed = remove_outputs(task)
        how = f"was {ended.cancelled}" if ended.cancelled else f"ended with exit code {ended.exit_code}"
        logger.warning("Task %s: its last job (%s) %s; its outputs may be partial and do not count%s", task, earlier,
                       how, f": removed {', '.join(removed)}" if removed else "")
        return False

    def poll(self) -> list[TaskResult]:
        """Poll the run; the results of tasks whose job ended (and whose outputs showed or timed out)."""
        for job in self.run.poll():
            self.ended(job)
        return self.results()

    def ended(self, job: Job) -> None:
        """A job the run's poll handed back: judge what its end means for the task (see :meth:`results`)."""
        self._judge(job)

    def results(self) -> list[TaskResult]:
        """The results of tasks whose job ended (and whose outputs showed or timed out) since the last call."""
        now = time.monotonic()
        for task_id, deadline in list(self._awaiting_outputs.items()):
            self._check_outputs(self.jobs[task_id], deadline, now)
        results, self._results = self._results, []
        return results

    def cancel(self, task: Any) -> None:
        job = self.jobs.pop(task.task_id, None)
        self._awaiting_outputs.pop(task.task_id, None)
        if job is not None:
            self.run.cancel([job])

    def _judge(self, job: Job) -> None:
        task = job.payload
        if job.not_submitted:
            self._end(job, FAILED, job.failure_message())
            return
        result, exit_code = job.outcome.result, job.outcome.exit_code  # the engine's reading of the job's end
        if result is not None and result.get("status") == PENDING and result.get("new_deps"):
            logger.info("Job %s: task %s has new dynamic requirements", job.job_id, task)
            self.jobs.pop(task.task_id, None)
            self.run.record.update(job, "waiting")
            self._results.append(TaskResult(task, PENDING, "", [tuple(d) for d in result["new_deps"]]))
            return
        if exit_code == 0 and (result is None or result.get("status") == DONE):
            # Without a result, a unit that ended well in a pilot whose worker was lost between the unit's exit
            # code's file and the line of its log that hands the result over: the task's outputs tell.
            # Local jobs share this host's file system: their outputs are there at once, or never.
            wait = 0.0 if _on_this_host(job) else job.config["output_wait_timeout"]
            deadline = time.monotonic() + wait
            self._check_outputs(job, deadline, time.monotonic())
            return
        error = (result or {}).get("error", "")
        if result is not None and result.get("status") == "checkpointed":
            error = (f"it saved its checkpoint on the batch system's warning {job.requeues} time(s) and was not "
                     f"requeued again (max_checkpoint_requeues = {job.config['max_checkpoint_requeues']}): raise "
                     f"the setting or the job's time limit")
        self._end(job, FAILED, job.failure_message(error=error))

    def _check_outputs(self, job: Job, deadline: float, now: float) -> None:
        task = job.payload
        if task.complete():
            self._end(job, DONE)
        elif now < deadline:
            self._awaiting_outputs[task.task_id] = deadline
        else:
            missing = ", ".join(missing_outputs(task))
            if _on_this_host(job):
                what = f"its job ended without writing the outputs it declares: {missing}"
            else:
                timeout = job.config["output_wait_timeout"]
                what = (f"its outputs did not appear within {timeout} s (setting output_wait_timeout): {missing}. "
                        f"Check that result_dir is on a file system the submit host sees, or that the task "
                        f"writes the outputs it declares")
            self._end(job, FAILED, f"Job {job.job_id} of task {task} succeeded, but {what}.")

    def _end(self, job: Job, status: str, explanation: str = "") -> None:
        task = job.payload
        if status == FAILED and not job.not_submitted:
            removed = remove_outputs(task)  # what a failed job wrote may be partial: it never counts
            if removed:
                logger.warning("Task %s failed: removed the outputs its job left, %s", task, ", ".join(removed))
            if task.task_id not in self._counted:  # once per run, across runs (max_task_failures)
                self._counted.add(task.task_id)
                poison.count_failure(job.files.folder, explanation, job.files.stderr)
        elif status == DONE:
            poison.forget(job.files.folder)
            checkpoint.remove_checkpoint(task)
        self.jobs.pop(task.task_id, None)
        self._awaiting_outputs.pop(task.task_id, None)
        self.run.settle(job, status == DONE, explanation)
        self._results.append(TaskResult(task, status, explanation))
