"""``requires`` and ``inherits``: class decorators of b2batch's tasks with b2luigi's signatures (classes, as
b2luigi's and luigi's are), offered as ``b2batch.requires`` and ``b2batch.inherits``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


class requires:
    """Class decorator: the task requires each of ``tasks_to_require`` with its own parameters, inheriting
    them; keyword arguments fix parameter values of the required tasks (they are then not inherited). A class,
    as b2luigi's (and luigi's) ``requires`` is."""

    def __init__(self, *tasks_to_require: type, **kwargs: Any) -> None:
        self.tasks_to_require = tasks_to_require
        self.kwargs = kwargs

    def __call__(self, task_class: type) -> type:
        tasks_to_require, kwargs = self.tasks_to_require, self.kwargs
        for required in tasks_to_require:
            for name, param in required.get_params():
                if name not in kwargs and not hasattr(task_class, name):
                    setattr(task_class, name, param)

        def requires_method(task: Any) -> Iterable[Any]:
            for required in tasks_to_require:
                yield task.clone(required, **kwargs)

        task_class.requires = requires_method
        return task_class


class inherits:
    """Class decorator: the task gets the parameters of ``tasks_to_inherit``, except those in ``without``, and
    the methods ``clone_parent(**kwargs)`` (the first of them cloned from the task) and ``clone_parents(**kwargs)``
    (all of them, a list). A class, as b2luigi's (and luigi's) ``inherits`` is."""

    def __init__(self, *tasks_to_inherit: type, without: str | Iterable[str] | None = None) -> None:
        self.tasks_to_inherit = tasks_to_inherit
        self.excluded = {without} if isinstance(without, str) else set(without or ())

    def __call__(self, task_class: type) -> type:
        for inherited in self.tasks_to_inherit:
            for name, param in inherited.get_params():
                if name not in self.excluded and not hasattr(task_class, name):
                    setattr(task_class, name, param)
        tasks_to_inherit = self.tasks_to_inherit

        def clone_parent(task: Any, **kwargs: Any) -> Any:
            """The first inherited task, made from this task's parameters (``kwargs`` override them)."""
            return task.clone(tasks_to_inherit[0], **kwargs)

        def clone_parents(task: Any, **kwargs: Any) -> list[Any]:
            """Every inherited task, in the decorator's order, made as ``clone_parent`` makes the first."""
            return [task.clone(inherited, **kwargs) for inherited in tasks_to_inherit]

        task_class.clone_parent = clone_parent
        task_class.clone_parents = clone_parents
        return task_class
