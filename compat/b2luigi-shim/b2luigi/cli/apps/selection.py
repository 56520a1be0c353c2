"""How ``show`` and ``graph`` choose their tasks: without names the root tasks of everything the task file's
classes can make with the parameters; with names the tasks of those classes, made directly from the
parameters or (when one cannot be made so, and not ``--direct``) found in the graphs of all the others."""

from __future__ import annotations

from typing import Any

from b2luigi.cli.utils import (TaskContext, _instances, _missing_parameter_error,
                                               check_param_applicability, find_tasks_in_tree, get_root_tasks)
from b2luigi.core.settings import get_setting
from b2luigi.core.utils import task_iterator


def all_roots(ctx: TaskContext) -> list[Any]:
    """The root tasks of everything the classes can make with the parameter combinations."""
    made, _none = _instances(ctx.index.all_classes(), ctx.param_dicts)
    return get_root_tasks(made)


def select(ctx: TaskContext, names: list[str] | None, consider_requirements: bool,
           direct: bool | None = None) -> list[Any]:
    """The tasks of the command. A ``--param`` that fits none of the named classes (with
    ``consider_requirements``: none of the classes of their graphs) is an error, without names a warning.
    ``direct`` (``--direct`` or the setting ``direct_mode``; None: not offered) makes a named class that the
    parameters cannot make an error instead of a search of the graph."""
    index = ctx.index
    if names is None:
        check_param_applicability(ctx.param_dicts[0], index.all_classes(), ctx.override_keys, named=False,
                                  target="any task")
        return all_roots(ctx)
    classes = index.resolve_many(names)
    made, unmade = _instances(classes, ctx.param_dicts)
    considered = list(classes)
    if consider_requirements:
        considered += [type(t) for task in made for t in task_iterator(task)]
    check_param_applicability(ctx.param_dicts[0], considered, ctx.override_keys, named=True,
                              target=", ".join(index.qualified_name(c) for c in classes))
    if not unmade:
        return made
    if direct is not None and (direct or get_setting("direct_mode", default=False)):
        raise _missing_parameter_error(index.qualified_name(unmade[0]), unmade[0], ctx.param_dicts[0])
    return find_tasks_in_tree(set(classes), all_roots(ctx))
