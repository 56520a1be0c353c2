"""``b2luigi.core.utils``: b2luigi's helper functions, on b2batch's path layout.

Paths are b2batch's (the same as b2luigi's for outputs and logs; job files live in b2batch's job folders).
A hashed parameter's text is b2batch's (``hashed_`` and the md5 of the serialized value, or what its
``hash_function`` makes of the value).

The command-line helpers (:func:`create_cmd_from_task`, :func:`create_apptainer_command`) build b2luigi's
command lines for code written against b2luigi (b2batch's own jobs are started by its job wrapper). They look
their settings up through this module's :func:`get_setting` (b2luigi's signature), and every value that
b2luigi or the task makes (parameters, file names, the environment script) is quoted for a shell; what the
user gives as lists of shell words (``executable``, ``executable_prefix``, ``task_cmd_additional_args``) is
passed as given.
"""

from __future__ import annotations

import collections
import itertools
import os
import shlex
import shutil
import sys
from collections.abc import Iterable, Iterator
from typing import Any

from b2batch.jobscript import base_folder
from b2batch.jobscript.container_command import ContainerCommand, apptainer_engine
from b2luigi.core.settings import get_setting
from b2batch.luigi_frontend import layout
from b2batch import get_setting as _b2batch_setting

__all__ = ["SYNTHETIC_TASK_MODULE", "create_apptainer_command", "create_cmd_from_task", "create_output_file_name",
           "fill_kwargs_with_lists", "flatten_to_dict", "flatten_to_dict_of_lists", "flatten_to_file_paths",
           "get_apptainer_or_singularity", "get_filename", "get_filled_params", "get_log_file_dir",
           "get_serialized_parameters", "get_task_file_dir", "is_subdir", "map_folder", "product_dict",
           "task_iterator"]

#: The module name b2luigi's command line gives the classes of the task file it imports: such a class is
#: named bare in a worker's command (the worker imports the task file itself), any other one with its module.
SYNTHETIC_TASK_MODULE = "TaskClasses"

_UNSET: Any = object()


def product_dict(**kwargs: Iterable[Any]) -> Iterator[dict[str, Any]]:
    """Every combination of the keyword arguments' values: ``product_dict(a=[1, 2], b=[3])`` yields
    ``{"a": 1, "b": 3}`` and ``{"a": 2, "b": 3}``."""
    names = list(kwargs)
    for values in itertools.product(*kwargs.values()):
        yield dict(zip(names, values))


def fill_kwargs_with_lists(**kwargs: Any) -> dict[str, list[Any]]:
    """The keyword arguments with each value made a list: a string or a non-iterable ``x`` becomes ``[x]``,
    ``None`` becomes ``[]``, iterables stay as they are."""
    filled = {}
    for name, value in kwargs.items():
        if value is None:
            value = []
        elif isinstance(value, str) or not isinstance(value, collections.abc.Iterable):
            value = [value]
        filled[name] = value
    return filled


def _flatten(struct: Any) -> list[Any]:
    """Nested iterables as one list; dicts and strings are kept whole."""
    if isinstance(struct, (dict, str)):
        return [struct]
    try:
        items = iter(struct)
    except TypeError:
        return [struct]
    return [leaf for item in items for leaf in _flatten(item)]


def _as_dict(value: Any) -> dict[Any, Any]:
    return value if isinstance(value, dict) else {value: value}


def flatten_to_dict(inputs: Any) -> dict[Any, Any]:
    """Any structure of dicts and iterables as one dict: dicts merged (later keys win), any other ``x`` as
    ``{x: x}``."""
    joined: dict[Any, Any] = {}
    for item in _flatten(inputs):
        joined.update(_as_dict(item))
    return joined


def flatten_to_dict_of_lists(inputs: Any) -> dict[Any, list[Any]]:
    """Like :func:`flatten_to_dict`, keeping every value of a key, in order."""
    joined: dict[Any, list[Any]] = collections.defaultdict(list)
    for item in _flatten(inputs):
        for key, value in _as_dict(item).items():
            joined[key].append(value)
    return dict(joined)


def _path_of(target: Any) -> Any:
    return target.path if hasattr(target, "path") else target


def flatten_to_file_paths(inputs: Any) -> dict[str, list[Any]]:
    """Targets (in any structure of dicts and lists) as ``{key: [paths]}``; a key that is a target becomes
    the base name of its path."""
    return {os.path.basename(_path_of(key)): [_path_of(v) for v in values]
            for key, values in flatten_to_dict_of_lists(inputs).items()}


def task_iterator(task: Any, only_non_complete: bool = False) -> Iterator[Any]:
    """The task and everything it requires, each task once; with ``only_non_complete``, complete tasks and
    what only they require are skipped."""
    seen: set[str] = set()

    def visit(current: Any) -> Iterator[Any]:
        if only_non_complete and current.complete():
            return
        yield current
        for requirement in current.deps():
            if requirement.task_id not in seen:
                seen.add(requirement.task_id)
                yield from visit(requirement)

    yield from visit(task)


def get_filled_params(task: Any) -> dict[str, Any]:
    """Every parameter of the task with its value."""
    return {name: getattr(task, name) for name, _param in task.get_params()}


def get_serialized_parameters(task: Any) -> collections.OrderedDict[str, str]:
    """The significant parameters as strings, in declared order; hashed ones as they appear in paths."""
    return collections.OrderedDict(
        (name, layout.path_value(param, getattr(task, name), bool(_b2batch_setting("b2luigi_hashing", task=task))))
        for name, param in task.get_params() if param.significant
    )


def get_filename() -> str:
    """The absolute path of the file that defines the tasks: ``$B2LUIGI_TASK_FILE`` if set; in a b2batch
    job, a file in the steering process's base folder (or in the one ``$B2BATCH_BASE_DIR`` names); the script
    Python was started with (``python tasks.py``); else ``tasks.py`` in the working directory (``python -m ...`` or a command-line
    entry point). Raises ``AttributeError`` when ``__main__`` has no file (an interactive session)."""
    given = os.environ.get("B2LUIGI_TASK_FILE")
    if given:
        return os.path.abspath(given)
    main = sys.modules.get("__main__")
    main_file = getattr(main, "__file__", None)
    given_folder = base_folder.given_base_dir()  # a job's (its steering process's), or $B2BATCH_BASE_DIR
    if given_folder is not None:
        return os.path.join(given_folder, os.path.basename(main_file or "") or "tasks.py")
    if main_file is None:
        raise AttributeError("module '__main__' has no attribute '__file__'")
    if main_file.endswith(".py") and getattr(main, "__spec__", None) is None:
        return os.path.abspath(main_file)
    return os.path.join(os.path.abspath(os.getcwd()), "tasks.py")


def map_folder(input_folder: str) -> str:
    """``input_folder`` as it is when absolute, else joined to the folder of :func:`get_filename`; an
    ``AttributeError`` (no script, e.g. in a notebook) says to give absolute folders."""
    if os.path.isabs(input_folder):
        return input_folder
    try:
        script = get_filename()
    except AttributeError as error:
        raise AttributeError(
            "Could not determine the current script location. In an interactive session (a notebook, the "
            f"Python prompt) give absolute folders in the settings. Reason:\n{error}").with_traceback(
                error.__traceback__) from None
    return os.path.join(os.path.dirname(script), input_folder)


def is_subdir(path: str, parent_dir: str) -> bool:
    """Whether ``path`` is ``parent_dir`` or lies below it (both made absolute, no file system access)."""
    path, parent_dir = os.path.abspath(path), os.path.abspath(parent_dir)
    return os.path.commonpath([path, parent_dir]) == parent_dir


def create_output_file_name(task: Any, base_filename: str, result_dir: str | None = None) -> str:
    """The path of the output ``base_filename`` of ``task``: ``<result_dir>/<parameters>/<base_filename>``."""
    return str(layout.output_path(task, base_filename, result_dir=result_dir or None))


def get_log_file_dir(task: Any) -> str:
    """The folder of the task's log files (``task.get_log_file_dir()`` if the task has that method)."""
    if hasattr(task, "get_log_file_dir"):
        return task.get_log_file_dir()
    return os.path.join(str(layout.log_folder(task)), "")


def get_task_file_dir(task: Any) -> str:
    """The folder of the task's job files (``task.get_task_file_dir()`` if the task has that method)."""
    if hasattr(task, "get_task_file_dir"):
        return task.get_task_file_dir()
    from b2batch.luigi_frontend.task_job_files import task_files

    return os.path.join(str(task_files(task).folder), "")


# --- command lines ------------------------------------------------------------------------------------------

def _word_list(value: Any, setting: str, example: str) -> list[str]:
    if isinstance(value, str):
        raise ValueError(f"Your specified {setting} needs to be a list of strings, e.g. {example}")
    return list(value)


def _worker_classname(task: Any) -> str:
    cls = type(task)
    return cls.__name__ if cls.__module__ == SYNTHETIC_TASK_MODULE else f"{cls.__module__}.{cls.__name__}"


def create_cmd_from_task(task: Any) -> list[str]:
    """b2luigi's command that runs ``task`` on a worker, as a list of shell words to be joined with spaces.

    With the setting ``__batch_runner_use_cli`` (b2luigi's command line sets it): ``<executable_prefix>
    <executable> [-m <batch_runner_cli>] batch-runner --classname <class> --param name=value ...
    [--task-file F] [--params-file F] <task_cmd_additional_args>``; ``-m`` is left out when
    ``executable_is_entrypoint`` (default: true when ``executable`` is not set, which then is
    ``[batch_runner_cli]``). Else ``<executable_prefix> <executable> <script> --batch-runner --task-id <id>
    <task_cmd_additional_args>`` (the script's name left out when ``add_filename_to_cmd`` is false).
    Raises ``ValueError`` when one of the lists is given as a string."""
    extra = _word_list(get_setting("task_cmd_additional_args", task=task, default=[]), "task_cmd_additional_args",
                       "['--foo', 'bar']")
    prefix = _word_list(get_setting("executable_prefix", task=task, default=[], deprecated_keys=["cmd_prefix"]),
                        "executable_prefix", "[strace]")
    executable = get_setting("executable", task=task, default=_UNSET)
    executable = None if executable is _UNSET or executable is None else _word_list(executable, "executable",
                                                                                    "[python3]")
    if not get_setting("__batch_runner_use_cli", default=False):
        script = os.path.basename(get_filename()) if get_setting("add_filename_to_cmd", task=task, default=True) \
            else ""
        return [*prefix, *(executable or [sys.executable]), shlex.quote(script) if script else script,
                "--batch-runner", "--task-id", shlex.quote(task.task_id), *extra]
    cli = get_setting("batch_runner_cli", task=task, default="b2luigi")
    entrypoint = get_setting("executable_is_entrypoint", task=task, default=executable is None)
    if executable is None:
        executable = [cli] if entrypoint else [sys.executable]
    cmd = [*prefix, *executable, *([] if entrypoint else ["-m", cli]), "batch-runner",
           "--classname", shlex.quote(_worker_classname(task))]
    for name, value in task.to_str_params().items():
        cmd += ["--param", shlex.quote(f"{name}={value}")]
    for option, setting in (("--task-file", "__batch_runner_task_file"), ("--params-file", "__batch_runner_params_file")):
        given = get_setting(setting, default=False)
        if given:
            cmd += [option, shlex.quote(str(given))]
    return cmd + extra


def get_apptainer_or_singularity(task: Any = None) -> str:
    """The container command: the setting ``apptainer_cmd``, else ``apptainer`` or ``singularity`` if on
    PATH; a ``ValueError`` when there is neither."""
    chosen = get_setting("apptainer_cmd", task=task, default="")
    if chosen:
        return chosen
    for name in ("apptainer", "singularity"):
        if shutil.which(name):
            return name
    raise ValueError("Neither apptainer nor singularity is available on this system. If you know that one of them "
                     "is available on the batch system you can manually set it via the `apptainer_cmd` setting.")


def create_apptainer_command(command: str, task: Any = None) -> list[str]:
    """The argv that runs the shell command ``command`` in the ``apptainer_image`` after sourcing
    ``env_script``: ``<apptainer> exec <apptainer_additional_params> --bind <mount>... <image> /bin/bash -c
    "source <env_script> && <command>"``. The mounts are ``apptainer_mounts`` and, with
    ``apptainer_mount_defaults`` (default true), the result and log folders that are not below the working
    directory (made if missing). ``apptainer_additional_params`` is a string of shell words or a list.
    Nothing in the argv carries quotes of its own except the environment script's path inside the payload.
    Raises ``ValueError`` without ``env_script`` and for the batch system gbasf2."""
    env_script = get_setting("env_script", task=task, default="")
    if not env_script:
        raise ValueError("Apptainer execution requires an environment setup script.")
    image = get_setting("apptainer_image", task=task, default="")
    if get_setting("batch_system", task=task, default="auto") == "gbasf2":
        raise ValueError("Invalid batch system for apptainer usage. Apptainer is not supported for gbasf2.")
    executable = get_apptainer_or_singularity(task=task)
    options = get_setting("apptainer_additional_params", task=task, default="")
    mounts = list(get_setting("apptainer_mounts", task=task, default=None) or [])
    if get_setting("apptainer_mount_defaults", task=task, default=True):
        result_dir = get_setting("result_dir", task=task, default=".", deprecated_keys=["result_path"])
        for folder in (map_folder(result_dir), get_log_file_dir(task)):
            os.makedirs(folder, exist_ok=True)
            if not is_subdir(folder, os.getcwd()):
                mounts.append(folder)
    container = ContainerCommand(engine=apptainer_engine(executable), executable=executable, image=image,
                                 binds=mounts, b2luigi_spelling=True,
                                 options=(shlex.split(options) if isinstance(options, str) else list(options or [])))
    return container.argv(["/bin/bash", "-c", f"source {shlex.quote(str(env_script))} && {command}"])
