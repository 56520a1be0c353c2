"""The node side of a job: rebuild exactly one task from its spec and run it as luigi would.

Tasks defined in the workflow script (``__main__``) are rebuilt by running the script again: its call of
:func:`b2batch.process` sees the job and runs only this task (:func:`active_spec`). Tasks of importable
modules are rebuilt by importing their module only. The outcome goes to the spec's result file: DONE,
FAILED with the error, or PENDING with new dynamic requirements.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import logging
import os
import runpy
import signal
import sys
from pathlib import Path
from typing import Any

import luigi.task_register
from luigi.scheduler import DONE, PENDING

from b2batch.jobscript import base_folder
from b2batch.engine.preemption import Checkpointed
from b2batch.engine.unwinding import unwind_on_sigterm
from b2batch.luigi_frontend import checkpoint, job_on_node, local_on_engine
from b2batch.luigi_frontend.acceptance import acceptance_of
from b2batch.luigi_frontend.seam import run_in_process
from b2batch.settings import use_settings_snapshot

logger = logging.getLogger(__name__)

#: Public (``b2batch.PUBLIC_MODULES``): what code outside b2batch (the b2luigi shim, plugins) may import.
__all__ = ["active_spec", "import_file_as"]

_active_spec: dict[str, Any] | None = None


def active_spec() -> dict[str, Any] | None:
    """The spec of the job this process runs, or None in a steering process."""
    return _active_spec


class StatusReporter:
    """What luigi's TaskProcess forwards to a running task; in a job, messages go to the log."""

    scheduler_messages = None

    def update_tracking_url(self, url: str) -> None:
        logger.info("tracking URL: %s", url)

    def update_status_message(self, message: str) -> None:
        logger.info("status: %s", message)

    def update_progress_percentage(self, percentage: float) -> None:
        logger.info("progress: %s%%", percentage)

    def decrease_running_resources(self, decrease_resources: dict[str, int]) -> None:
        """Resources are the batch system's business in a job."""


def load_task_module(spec: dict[str, Any]) -> None:
    """Import the module of the job's task: by its name, or (``task_module_file``: it was loaded from a file
    under another name, as b2luigi's command loads ``tasks.py`` as ``TaskClasses``) from that file."""
    name, file = spec["task_module"], spec.get("task_module_file")
    if name in sys.modules:
        return
    if not file:
        importlib.import_module(name)
        return
    import_file_as(name, file, f"b2batch: cannot load the task module {name} from {file}")


def import_file_as(name: str, file: str, unloadable: str) -> Any:
    """Execute ``file`` as the module ``name``, registered in ``sys.modules`` (luigi finds batched tasks there)
    and with its folder on ``sys.path`` (its siblings import, as they did for the steering process); an
    ImportError saying ``unloadable`` when it is no Python file, and no module left behind when it raises."""
    folder = str(Path(file).parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    module_spec = importlib.util.spec_from_file_location(name, file)
    if module_spec is None or module_spec.loader is None:
        raise ImportError(unloadable)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    try:
        module_spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def run_task(spec: dict[str, Any]) -> int:
    """Run the task of ``spec`` once and write its result file; the job's exit code."""
    if spec.get("task_module_file"):
        load_task_module(spec)
    task_class = luigi.task_register.Register.get_task_cls(spec["task_family"])
    task = task_class.from_str_params(spec["task_params"])
    job_on_node.attach(task, spec)  # the job's JobConfig, for b2batch's code that works for the job here
    result_file = Path(spec["result_file"])
    if spec.get("events_in_steering"):  # a run without --batch: its steering process fires them
        task.trigger_event = local_on_engine.no_event
    try:
        checkpoint.install(task, result_file.parent)
        status, explanation, missing, new_deps = run_in_process(task, "b2batch-job", StatusReporter(),
                                                                check_requirements=acceptance_of(task) is None)
        checkpoint.stand_down(task)
    except Checkpointed as stop:  # the checkpoint is saved: the job asks to be requeued, no failure
        _write_result(result_file, {"status": "checkpointed", "error": "", "missing": [], "new_deps": []})
        return checkpoint.requeue(task, result_file.parent, stop)
    explanation = _without_signal_traceback(explanation)
    result = {"status": status, "error": explanation, "missing": missing, "new_deps": [list(d) for d in new_deps]}
    _write_result(result_file, result)
    return 0 if status in (DONE, PENDING) else 1


def _write_result(result_file: Path, result: dict[str, Any]) -> None:
    """The task's result into its job folder; a task that simply succeeded in a pilot's or bundle's runner hands
    it to its worker instead, whose log line carries it to the steering process (one file less per task)."""
    if (result["status"] == DONE and not result.get("error") and not result.get("missing")
            and not result.get("new_deps")):
        runner = sys.modules.get("b2batch.engine.pilots.unit_processes")  # loaded where a worker runs units
        if runner is not None and runner.hand_result(result):
            return
    temporary = result_file.with_name(f".{result_file.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(result))
    os.replace(temporary, result_file)


def _without_signal_traceback(explanation: str | None) -> str | None:
    """A task stopped by a signal (the SystemExit of :func:`main`'s handler) is explained in one line, not by
    the traceback of wherever the signal happened to arrive (the job's stderr keeps that)."""
    last = (explanation or "").rstrip().rsplit("\n", 1)[-1]
    if last.startswith("SystemExit: "):
        code = last.removeprefix("SystemExit: ").strip()
        if code.isdigit() and 128 < int(code) < 160:
            try:
                name = signal.Signals(int(code) - 128).name
            except ValueError:
                name = f"signal {int(code) - 128}"
            return f"stopped by {name} while it ran (cancelled, or over a limit of the batch system)"
    return explanation


def run_unit(spec_file: str) -> int:
    """Run one task in a pilot or bundle job: in the worker's runner, a process that runs task after task
    (:mod:`b2batch.engine.pilots.unit_processes`). What the task changed of its task classes' attributes is put back after
    it and luigi's cache of task instances emptied, so that the next task finds its classes as they were
    loaded (as a task that had a process of its own would); what it changed inside a mutable class attribute
    (a list it appended to) is not put back."""
    classes = _ClassState()
    try:
        return run_task(json.loads(Path(spec_file).read_text()))
    finally:
        classes.restore()
        luigi.task_register.Register.clear_instance_cache()


_MISSING = object()


class _ClassState:
    """The attributes of every loaded task class (luigi's own excepted), to put back after a task ran."""

    def __init__(self) -> None:
        self.saved: list[tuple[type, dict[str, Any]]] = []
        pending = list(type.__subclasses__(luigi.Task))
        while pending:
            cls = pending.pop()
            pending.extend(type.__subclasses__(cls))
            if not cls.__module__.startswith("luigi."):
                self.saved.append((cls, dict(cls.__dict__)))

    def restore(self) -> None:
        for cls, saved in self.saved:
            current = cls.__dict__
            if len(current) == len(saved) and all(current.get(k, _MISSING) is v for k, v in saved.items()):
                continue
            for name in [name for name in current if name not in saved]:
                delattr(cls, name)
            for name, value in saved.items():
                if current.get(name, _MISSING) is not value and name not in ("__dict__", "__weakref__"):
                    setattr(cls, name, value)


def run_spec(spec: dict[str, Any]) -> int:
    """Run what a job's spec says: a worker (pilot or bundle) of tasks, or one task."""
    if "worker" in spec:
        from b2batch.engine.pilots import node_worker

        return node_worker.serve(spec)
    return run_task(spec)


def main(argv: list[str]) -> int:
    """Run the job described by the spec file ``argv[0]``: one task, or a pilot or bundle of tasks."""
    global _active_spec
    # A cancelled job gets SIGTERM: unwind (once), so that on_temporary_files removes its temporary outputs.
    unwind_on_sigterm()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    spec = json.loads(Path(argv[0]).read_text())
    if "worker" in spec:
        spec.setdefault("task_module", "__main__" if spec.get("script") else "")
    base_folder.pin_base_dir(spec["base_dir"])
    use_settings_snapshot(spec["settings"])
    script = spec.get("script")
    if script:
        sys.path.insert(0, str(Path(script).parent))
    _active_spec = spec
    if spec["task_module"] == "__main__":
        if not script:
            raise SystemExit(f"b2batch: task {spec['task_family']} is defined in an interactive session; "
                             f"define it in a script or module to run it as a job.")
        sys.argv = [script, *spec.get("argv", [])]
        # The script's process() call runs the task and exits; a script without one just defines tasks.
        runpy.run_path(script, run_name="__main__")
    elif spec["task_module"]:
        load_task_module(spec)
    return run_spec(spec)
