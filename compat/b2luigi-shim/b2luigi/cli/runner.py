"""``b2luigi.cli.runner``: what the subcommands do with the tasks once they are made. The texts are in
``render`` (show, graph, tasks) and ``removal`` (remove); ``--dry`` is b2batch's b2luigi dry run
(``luigi_frontend.b2luigi_cli``). ``b2luigi run`` goes through ``b2luigi.process`` (b2batch's engine, its batch
systems); ``run_luigi`` here is the plain ``luigi.build`` of b2luigi's helper, for callers that use it.
``console`` and ``stderr_console`` are where everything is printed (replace them to capture it): they live in
``output``, and this module's class reads and replaces them there."""

from __future__ import annotations

import os
import sys
import types
from typing import Any, NoReturn

import luigi
import luigi.task

from b2luigi.cli.removal import (REMOVE_OUTPUT_ACTION, _call_remove_methods,  # noqa: F401
                                                 _confirm_and_remove, legacy_remove_outputs, remove_outputs,
                                                 remove_requirement_outputs)
from b2luigi.cli.render import (_build_parent_map, _render_task_outputs,  # noqa: F401
                                                get_task_outputs, render_graph_dot, render_graph_summary,
                                                render_graph_tree, render_task_help, render_task_list,
                                                show_all_outputs, show_task_outputs)
from b2luigi.cli.utils import parse_kv_params, suggest  # noqa: F401
from b2luigi.core.settings import get_setting, set_setting
from b2luigi.core.utils import task_iterator  # noqa: F401 - a name of b2luigi's runner
from b2luigi.cli import output
from b2batch.luigi_frontend import b2luigi_cli, batch_worker


class _RunnerModule(types.ModuleType):
    """This module, whose ``console`` and ``stderr_console`` are :mod:`~b2luigi.cli.output`'s: reading one reads
    it there, replacing one (``runner.console = Console(file=...)``, a test's ``monkeypatch``) replaces it there,
    so that everything the command prints goes to the replacement."""

    @property
    def console(self) -> Any:
        return output.console

    @console.setter
    def console(self, value: Any) -> None:
        output.console = value

    @property
    def stderr_console(self) -> Any:
        return output.stderr_console

    @stderr_console.setter
    def stderr_console(self, value: Any) -> None:
        output.stderr_console = value


sys.modules[__name__].__class__ = _RunnerModule


def run_luigi(task_list: list[Any], kwargs: dict[str, Any], worker_scheduler_factory: Any = None) -> Any:
    """``luigi.build`` of the tasks: the central scheduler of ``scheduler_host``/``scheduler_port`` or a
    local one, ``workers`` from the setting unless given, log level INFO."""
    host = kwargs.pop("scheduler_host", None)
    port = kwargs.pop("scheduler_port", None)
    if host or port:
        kwargs.update({k: v for k, v in (("scheduler_host", host), ("scheduler_port", port)) if v})
    else:
        kwargs["local_scheduler"] = True
    if worker_scheduler_factory is not None:
        kwargs["worker_scheduler_factory"] = worker_scheduler_factory
    kwargs.setdefault("workers", get_setting("workers", default=1))
    kwargs.setdefault("log_level", "INFO")
    return luigi.build(task_list, **kwargs)


def run_local(task_list: list[Any], kwargs: dict[str, Any]) -> Any:
    """:func:`run_luigi` with the batch system ``local``."""
    set_setting("batch_system", "local")
    return run_luigi(task_list, kwargs)


def run_batched(task_list: list[Any], kwargs: dict[str, Any]) -> Any:
    return run_luigi(task_list, kwargs)


def run_test_mode(task_list: list[Any], kwargs: dict[str, Any]) -> Any:
    """The tasks here, with luigi's local scheduler and DEBUG logs."""
    set_setting("_dispatch_local_execution", True)
    return luigi.build(task_list, log_level="DEBUG", local_scheduler=True, **kwargs)


def create_output_dirs(task: Any) -> None:
    """The folders of the task's output files."""
    for target in luigi.task.flatten(task.output()):
        path = getattr(target, "path", None)
        if isinstance(path, str) and os.path.dirname(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)


#: Run one task here, as a batch job does (``b2luigi batch-runner``): b2batch's batch worker.
run_batch_worker = batch_worker.run_here


def run_as_batch_worker(task_list: list[Any], cli_args: Any) -> None:
    """:func:`run_batch_worker` for the task of id ``cli_args.task_id`` in the graphs of ``task_list``."""
    batch_worker.run_task_of_id(task_list, cli_args.task_id)


def dry_run(task_list: list[Any]) -> NoReturn:
    """Per class the tasks that would run (``Would run``, ``call: dry_run()``), then ``In total N`` or
    ``All tasks are finished!``; ends with status 0."""
    b2luigi_cli.dry_run(task_list)


try:  # ``b2luigi test``'s helpers (runner.test_task ...), in their own module
    from b2luigi.cli.fast_test import *  # noqa: F401,F403
except ModuleNotFoundError as missing:
    if missing.name != "b2luigi.cli.fast_test":
        raise
