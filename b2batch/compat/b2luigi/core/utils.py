"""``b2luigi.core.utils``: b2luigi's helper functions, on b2batch's path layout.

Paths are b2batch's (the same as b2luigi's for outputs and logs; job files live in b2batch's job folders).
A hashed parameter's text is b2batch's (``hashed_`` and the md5 of the serialized value, or what its
``hash_function`` makes of the value).
"""

from __future__ import annotations

import collections
import itertools
import os
from collections.abc import Iterable, Iterator
from typing import Any

from b2batch import paths
from b2batch.luigi_frontend import layout
from b2batch.settings import get_setting

__all__ = ["create_output_file_name", "fill_kwargs_with_lists", "flatten_to_dict", "flatten_to_dict_of_lists",
           "flatten_to_file_paths", "get_filled_params", "get_log_file_dir", "get_serialized_parameters",
           "get_task_file_dir", "map_folder", "product_dict", "task_iterator"]


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
        (name, layout.path_value(param, getattr(task, name), bool(get_setting("b2luigi_hashing", task=task))))
        for name, param in task.get_params() if param.significant
    )


def map_folder(input_folder: str) -> str:
    """``input_folder`` made absolute against the workflow script's folder."""
    return str(paths.resolve(input_folder))


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
    from b2batch.luigi_frontend.jobs import task_files

    return os.path.join(str(task_files(task).folder), "")
