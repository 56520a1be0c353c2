"""``b2luigi.cli.utils``: what the subcommands share. The files to read (``--task-file``, then
``$B2LUIGI_TASK_FILE``, then ``tasks.py``; the same for ``parameters.py`` and ``$B2LUIGI_PARAMS_FILE``), the
tasks a command addresses (named, or all; made directly from the parameters, or found in the graphs of all
tasks that can be made), errors shown as b2luigi shows them, and the hand-over of a run to ``b2luigi.process``
(b2batch's ``process``). Loading and parameters are in ``loading`` and ``params``; their names are here too."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import luigi
import luigi.task
from click import Context as ClickContext
from click import Parameter as ClickParameter
from click.shell_completion import CompletionItem

import b2luigi  # the shim's package: ``b2luigi.process`` is b2batch's process()
from b2luigi.cli.errors import CliUserError, _render_cli_error
from b2luigi.cli.loading import (TaskIndex, build_task_index_from, import_from_file,  # noqa: F401
                                                 is_from_task_classes, load_task_class_from, task_generator)
from b2luigi.cli.params import (check_param_applicability, expand_parameters,  # noqa: F401
                                                load_parameters, parse_kv_params, partition_params,
                                                split_kv_params, suggest, unknown_param_error,
                                                warn_ignored_params)
from b2luigi.core.settings import get_setting, set_setting
from b2luigi.core.utils import task_iterator
from b2batch.luigi_frontend import batch_worker


@dataclass(frozen=True)
class Defaults:
    task_file: str
    params_file: str


def resolve_defaults(task_file: str | None, params_file: str | None) -> Defaults:
    """The files to read: the option, else the environment variable, else ``tasks.py``/``parameters.py``."""
    return Defaults(task_file=task_file or os.getenv("B2LUIGI_TASK_FILE") or "tasks.py",
                    params_file=params_file or os.getenv("B2LUIGI_PARAMS_FILE") or "parameters.py")


@contextmanager
def cli_error_boundary() -> Iterator[None]:
    """A ``CliUserError`` in the block is shown (the red panel) and ends the command with its exit code, also
    when the typer app is called directly (``typer.testing.CliRunner``), not through ``main()``."""
    try:
        yield
    except CliUserError as e:
        _render_cli_error(str(e))
        raise SystemExit(e.exit_code) from e


def build_task_index(task_file: str = "tasks.py") -> TaskIndex:
    """Import the task file and index the task classes a command can name."""
    return build_task_index_from(task_file)


def load_task_class(class_name: str, filename: str = "tasks.py") -> type:
    """The task class ``class_name`` (bare or ``module.Class``) of the task file's project."""
    return load_task_class_from(build_task_index(filename), class_name)


@dataclass(frozen=True)
class TaskContext:
    """The classes, the parameters (config and ``--param``, unexpanded), their combinations and the names that
    came from ``--param``."""

    index: TaskIndex
    merged_params: dict[str, Any]
    param_dicts: list[dict[str, Any]]
    override_keys: frozenset[str]


def resolve_task_context(task_filename: str | None, parameter_filename: str | None,
                         params: list[str] | None = None) -> TaskContext:
    """What ``show``, ``remove`` and ``graph`` start from; ``--param`` wins over the parameters file."""
    files = resolve_defaults(task_filename, parameter_filename)
    index = build_task_index(files.task_file)
    overrides = parse_kv_params(params or [])
    merged = {**load_parameters(files.params_file), **overrides}
    return TaskContext(index=index, merged_params=merged, param_dicts=expand_parameters(merged),
                       override_keys=frozenset(overrides))


def try_instantiate(cls: type, params: dict[str, Any]) -> Any:
    """``cls`` made with the params it declares, or None when one it needs is missing."""
    own = {name for name, _param in cls.get_params()}
    try:
        return cls(**{name: value for name, value in params.items() if name in own})
    except luigi.parameter.MissingParameterException:
        return None


def _instances(classes: list[type], param_dicts: list[dict[str, Any]]) -> tuple[list[Any], list[type]]:
    """Every task that the classes make with the combinations (each task once), and the classes that made none."""
    made: dict[str, Any] = {}
    none_made = []
    for cls in classes:
        made_any = False
        for params in param_dicts:
            task = try_instantiate(cls, params)
            if task is not None and task.task_id not in made:
                made[task.task_id] = task
                made_any = True
        if not made_any:
            none_made.append(cls)
    return list(made.values()), none_made


def build_task_list(target_classes: list[type], index: TaskIndex, param_dicts: list[dict[str, Any]],
                    direct_mode: bool) -> tuple[list[Any], list[type]]:
    """The tasks of ``target_classes``: made directly when every class can be; else (``direct_mode``: no
    tasks, and the classes that cannot be made) found in the graphs of every task the index can make."""
    direct, unresolved = _instances(target_classes, param_dicts)
    if not unresolved:
        return direct, []
    if direct_mode:
        return [], unresolved
    roots, _ = _instances(index.all_classes(), param_dicts)
    return find_tasks_in_tree(set(target_classes), roots), []


def find_tasks_in_tree(target_classes: set[type], root_tasks: list[Any]) -> list[Any]:
    """The tasks of exactly these classes in the graphs of ``root_tasks``, each once."""
    found: dict[str, Any] = {}
    for root in root_tasks:
        for task in task_iterator(root):
            if type(task) in target_classes:
                found.setdefault(task.task_id, task)
    return list(found.values())


def get_task_instance(class_name: str, task_filename: str = "tasks.py", parameters_file: str = "parameters.py",
                      overrides: dict[str, object] | None = None) -> Any:
    """The task of class ``class_name`` made with the parameters file's config and ``overrides``."""
    params = load_parameters(parameters_file)
    cls = load_task_class(class_name, task_filename)
    params.update(overrides or {})
    return cls(**params)


def get_root_tasks(task_list: list[Any]) -> list[Any]:
    """The tasks of the list that no task of the list requires."""
    required = {dep.task_id for task in task_list for dep in luigi.task.flatten(task.requires())}
    return [task for task in task_list if task.task_id not in required]


@dataclass(frozen=True)
class RemovalTargets:
    """What ``remove`` acts on: the tasks, the class names to remove and to keep, and whether names were
    given."""

    task_list: list[Any]
    target_names: list[str]
    keep_names: list[str] | None
    named: bool


def _missing_parameter_error(name: str, cls: type, merged_params: dict[str, Any], hint: str = "") -> CliUserError:
    """The error for a class that cannot be made from the parameters, with luigi's word on what is missing."""
    own = {n for n, _param in cls.get_params()}
    try:
        cls(**{k: v for k, v in merged_params.items() if k in own})
    except luigi.parameter.MissingParameterException as e:
        message = f"Cannot instantiate {name} directly — {e}\n" + (hint + "\n" if hint else "")
        return CliUserError(message + "Add the missing parameter(s) with --param <key>=<value> or set in "
                                      "parameters.py.")
    return CliUserError(f"Cannot instantiate task(s) {[name]!r} in direct mode. Add missing parameters with "
                        f"--param <key>=<value> or set in parameters.py.")


def resolve_removal_targets(task_filename: str | None, parameter_filename: str | None, params: list[str] | None,
                            classnames: list[str] | None, keep: str | None, direct: bool,
                            with_requirements: bool) -> RemovalTargets:
    """The tasks ``remove`` acts on; a ``--param`` that no addressed class (with ``--with-requirements``:
    no class of their graphs) has is an error."""
    ctx = resolve_task_context(task_filename, parameter_filename, params)
    index = ctx.index
    keep_list = parse_classnames(keep)
    keep_classes = index.resolve_many(keep_list) if keep_list else None
    named = classnames is not None
    targets = index.resolve_many(classnames) if named else index.all_classes()
    direct = direct or bool(get_setting("direct_mode", default=False))
    task_list, unresolved = build_task_list(targets, index, ctx.param_dicts, direct)
    if unresolved:
        first = sorted(unresolved, key=index.qualified_name)[0]
        raise _missing_parameter_error(index.qualified_name(first), first, ctx.merged_params)
    considered = list(targets)
    if with_requirements and named:
        considered += [type(required) for task in task_list for required in task_iterator(task)]
    check_param_applicability(ctx.param_dicts[0], considered, ctx.override_keys, named=named,
                              target=", ".join(index.qualified_name(c) for c in targets) if named else "any task",
                              strict=True)
    return RemovalTargets(task_list=task_list, target_names=[cls.__name__ for cls in targets],
                          keep_names=[cls.__name__ for cls in keep_classes] if keep_classes else None, named=named)


def process_task_instance(task_instance: Any, task_file: str | None = None, params_file: str | None = None,
                          **kwargs: Any) -> None:
    """Run the task with ``b2luigi.process`` (b2batch's), with job commands in the ``b2luigi batch-runner``
    form: the settings ``__batch_runner_use_cli``, and ``__batch_runner_task_file``/``__batch_runner_params_file``
    for the files given (as given: a relative path is read in the job's working_dir)."""
    set_setting("__batch_runner_use_cli", True)
    if task_file is not None:
        set_setting("__batch_runner_task_file", task_file)
    if params_file is not None:
        set_setting("__batch_runner_params_file", params_file)
    if kwargs.pop("batch_runner", False):  # a job's task: run it here, not its graph (runner.run_batch_worker)
        batch_worker.run_here(task_instance)
        return
    b2luigi.process(task_instance, ignore_additional_command_line_args=True, **kwargs)


def parse_classnames(raw: str | None) -> list[str] | None:
    """Comma-separated names as a list (blanks dropped), or None when there is none."""
    names = [name.strip() for name in (raw or "").split(",") if name.strip()]
    return names or None


def complete_task_names(ctx: ClickContext, _param: ClickParameter, incomplete: str) -> list[CompletionItem]:
    """Shell completion of task names (of ``--task-file``, ``$B2LUIGI_TASK_FILE`` or ``tasks.py``); nothing,
    never an error, when the task file cannot be read."""
    task_file = ctx.params.get("task_filename") or os.getenv("B2LUIGI_TASK_FILE", "tasks.py")
    try:
        names = build_task_index(task_file).completion_names()
    except Exception:
        return []
    return [CompletionItem(name) for name in names if name.startswith(incomplete)]
