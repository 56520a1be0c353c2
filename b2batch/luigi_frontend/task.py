"""Task classes with output-path helpers (their parameters' options ``hashed``, ``hidden`` and ``grouping``:
:mod:`b2batch.luigi_frontend.parameters`; ``requires``, ``inherits``: :mod:`b2batch.luigi_frontend.task_decorators`).

A task declares its outputs by name and gets their paths laid out under ``result_dir``::

    class Simulate(b2batch.Task):
        seed = b2batch.IntParameter()

        def output(self):
            yield self.add_to_output("events.root")

        @b2batch.on_temporary_files
        def run(self):
            write_events(self.get_output_file_name("events.root"))
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import luigi
import luigi.parameter
from luigi.task_register import Register

from b2batch.jobscript import base_folder
from b2batch.luigi_frontend import layout
from b2batch.luigi_frontend.file_settings import FileSettings
from b2batch.luigi_frontend.task_decorators import inherits, requires  # noqa: F401  (b2batch.task.requires)
from b2batch.luigi_frontend.temporary import _remove_path, _TemporaryOutputs, on_temporary_files, temporary_name  # noqa: F401
from b2batch.remote.urls import is_remote
from b2batch.settings import get_setting



class LocalTarget(luigi.LocalTarget):
    """luigi's LocalTarget (re-exported so that b2batch is a drop-in for b2luigi), with b2luigi's
    :attr:`tmp_name`."""

    @property
    def tmp_name(self) -> str:
        """A new temporary file name for this target (a name, no folder), as b2luigi makes it; the outputs of
        ``on_temporary_files`` are written under such names."""
        return temporary_name(str(self.path))

    @contextlib.contextmanager
    def temporary_path(self, task: Any = None, **tmp_file_kwargs: Any) -> Iterator[str]:
        """``with target.temporary_path() as path:`` write to ``path``, a :attr:`tmp_name` in a new folder
        under scratch_dir (the setting, of ``task``; without it next to the target); the file is moved to the
        target's path when the block ends without an exception, and the temporary folder removed either way."""
        scratch = FileSettings(task).scratch_dir
        final = Path(self.path)
        if scratch:
            scratch_folder = base_folder.resolve(scratch)
            scratch_folder.mkdir(parents=True, exist_ok=True)
            folder = Path(tempfile.mkdtemp(dir=scratch_folder, **tmp_file_kwargs))
        else:
            folder = final.parent
        folder.mkdir(parents=True, exist_ok=True)
        temporary = folder / self.tmp_name
        try:
            yield str(temporary)
            final.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(temporary), str(final))
        finally:
            if scratch:
                shutil.rmtree(folder, ignore_errors=True)

    def get_temporary_input(self, task: Any = None, **tmp_file_kwargs: Any) -> Any:
        """``with target.get_temporary_input() as path:`` read ``path``, a copy of the target's file (or
        folder) under a :attr:`tmp_name` in a new folder under scratch_dir (the setting, of ``task``; without
        it the system's temporary folder), removed when the block ends."""
        from b2batch.luigi_frontend.staging import local_copy

        return local_copy(str(self.path), self.tmp_name, FileSettings(task).scratch_dir, **tmp_file_kwargs)


# --- output helpers --------------------------------------------------------------------------------------

def _to_path(target: Any) -> str:
    return str(target.path) if hasattr(target, "path") else str(target)


def _collect(struct: Any, into: dict[str, list[str]], key: str | None = None) -> dict[str, list[str]]:
    """Gather ``{key: [paths]}`` from outputs: dicts, lists and generators of targets. A target is keyed by the
    nearest dict key above it, or else (a bare target, as plain luigi tasks have) by its file name."""
    if isinstance(struct, dict):
        for name, value in struct.items():
            _collect(value, into, name)
    elif isinstance(struct, (list, tuple)) or _is_lazy_iterable(struct):
        for item in struct:
            _collect(item, into, key)
    elif struct is not None:
        path = _to_path(struct)
        into.setdefault(key if key is not None else os.path.basename(path), []).append(path)
    return into


def _collect_targets(struct: Any, into: dict[Any, list[Any]], key: Any = None) -> dict[Any, list[Any]]:
    """Like :func:`_collect`, keeping the targets: ``{key: [targets]}``."""
    if isinstance(struct, dict):
        for name, value in struct.items():
            _collect_targets(value, into, name)
    elif isinstance(struct, (list, tuple)) or _is_lazy_iterable(struct):
        for item in struct:
            _collect_targets(item, into, key)
    elif struct is not None:
        into.setdefault(key if key is not None else os.path.basename(_to_path(struct)), []).append(struct)
    return into


def _is_lazy_iterable(value: Any) -> bool:
    return isinstance(value, Iterator)


def _is_remote_target(target_class: type) -> bool:
    """Whether ``target_class`` is a remote target (b2batch.remote is imported only when it is loaded already)."""
    import sys

    remote = sys.modules.get("b2batch.remote.base")
    return remote is not None and isinstance(target_class, type) and issubclass(target_class, remote.RemoteTarget)


class TaskHelpers:
    """Output-path helpers mixed into b2batch's task classes."""

    def add_to_output(self, output_file_name: str, target_class: type | None = None, result_dir: str | None = None,
                      **kwargs: Any) -> dict[str, Any]:
        """``{output_file_name: target}`` with the target's path under result_dir; yield it from output().

        As in b2luigi, ``target_class`` (default: a LocalTarget, or a remote target for a ``root://`` or
        ``davs://`` result_dir) is made from the path and ``kwargs`` (``XRootDTarget, file_system=fs``)."""
        path = str(layout.output_path(self, output_file_name, result_dir))
        root = result_dir if result_dir is not None else get_setting("result_dir", task=self)
        if target_class is not None:
            if "root" not in kwargs and _is_remote_target(target_class) and isinstance(root, str) \
                    and (is_remote(root) or root.startswith("/")):
                kwargs["root"] = root  # its result folder: listed at once by batched complete() checks
            return {output_file_name: target_class(path, **kwargs)}
        if is_remote(path):
            from b2batch.remote import outputs

            return {output_file_name: outputs.target_for(path, root=root, retry=FileSettings(self).retry)}
        return {output_file_name: LocalTarget(path)}

    def get_output_file_name(self, key: str) -> str:
        """The path of the output named ``key`` (a temporary one inside ``on_temporary_files``)."""
        outputs = _collect(self.output(), {})
        if key not in outputs:
            raise KeyError(f"Task {self} has no output {key!r}; its outputs are {sorted(outputs)}.")
        temporary = getattr(self, "_b2batch_temporary", None)
        if temporary is not None:  # a remote target on a file system written for b2luigi writes itself
            own = temporary.path_for_own_target(_collect_targets(self.output(), {})[key][0], self)
            if own is not None:
                return own
        if is_remote(outputs[key][0]):  # a local file inside on_temporary_files, uploaded when run() ends
            return str(temporary.path_for_remote(outputs[key][0])) if temporary is not None else outputs[key][0]
        path = outputs[key][0]  # as the target has it (b2luigi's "<folder>/./<file>" stays)
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        return str(temporary.path_for(Path(path))) if temporary is not None else path

    def get_all_output_file_names(self) -> Iterator[str]:
        """Every output path of the task."""
        for file_names in _collect(self.output(), {}).values():
            yield from file_names

    def input(self) -> Any:
        """luigi's ``input()``; for a task with a failure budget (``acceptance``) the outputs of its complete
        requirements only (docs/policies.md)."""
        if getattr(self, "acceptance", None) is None:
            return super().input()  # type: ignore[misc]
        from b2batch.luigi_frontend.acceptance import present_inputs

        return present_inputs(self)

    def missing_requirements(self) -> list[Any]:
        """The requirements that are not complete: what a task with ``acceptance`` runs without."""
        from b2batch.luigi_frontend.acceptance import missing_requirements

        return missing_requirements(self)

    @property
    def checkpoint_path(self) -> Path:
        """The file in which a task that defines ``checkpoint()`` keeps its state: ``checkpoint`` in its job
        folder (docs/policies.md)."""
        from b2batch.luigi_frontend.checkpoint import checkpoint_path

        return checkpoint_path(self)

    def get_input_file_names(self, key: str | None = None) -> dict[str, list[str]] | list[str]:
        """All input paths as ``{key: [paths]}``, or the list of paths of ``key`` across the requirements."""
        inputs = _collect(self.input(), {})
        if key is None:
            return inputs
        if key not in inputs:
            raise KeyError(f"Task {self} has no input {key!r}; its inputs are {sorted(inputs)}.")
        return inputs[key]

    def get_input_file_name(self, key: str | None = None) -> str:
        """The one input path of ``key`` (without a key: of the one input there is); an error when the
        requirements give none or several."""
        if key is None:
            inputs = _collect(self.input(), {})
            if len(inputs) == 1 and len(next(iter(inputs.values()))) == 1:
                return next(iter(inputs.values()))[0]
            raise ValueError(f"Task {self} has {sum(map(len, inputs.values()))} inputs, not one; name the input: "
                             f"get_input_file_name(key) with a key of {sorted(inputs)}.")
        names = self.get_input_file_names(key)
        if len(names) != 1:
            raise ValueError(f"Task {self} has {len(names)} inputs named {key!r}, not one; use "
                             f"get_input_file_names({key!r}) for a list.")
        return names[0]

    def get_input_file_names_from_dict(self, requirement_key: str,
                                       key: str | None = None) -> dict[str, list[str]] | list[str]:
        """Like :meth:`get_input_file_names`, for the requirement stored under ``requirement_key`` when
        ``requires()`` returns a dict."""
        inputs = _collect(self.input()[requirement_key], {})
        return inputs if key is None else inputs[key]

    def get_all_input_file_names(self) -> Iterator[str]:
        """Every input path of the task."""
        for file_names in _collect(self.input(), {}).values():
            yield from file_names

    # b2luigi 1.3's helpers of its Task, which its examples and user code call.

    @staticmethod
    def _transform_io(struct: Any) -> dict[str, list[str]]:
        """Targets in any structure of dicts and lists as ``{key: [paths]}``."""
        return _collect(struct, {})

    def _get_input_targets(self, key: str) -> list[Any]:
        """The input targets of ``key`` across the requirements (a ``KeyError`` when there are none)."""
        return _collect_targets(self.input(), {})[key]

    def _get_input_targets_by_key(self, requirement_key: str | None = None) -> dict[Any, list[Any]]:
        """``{key: [targets]}`` of the inputs; of the requirement stored under ``requirement_key`` when
        ``requires()`` returns a dict and it is given."""
        inputs = self.input()
        return _collect_targets(inputs if requirement_key is None else inputs[requirement_key], {})

    def _get_output_target(self, key: str) -> Any:
        """The output target of ``key`` (a ``KeyError`` when there is none)."""
        return _collect_targets(self.output(), {})[key][-1]

    def _get_output_file_target(self, base_filename: str, target_class: type | None = None,
                                result_dir: str | None = None, **kwargs: Any) -> Any:
        """The target that :meth:`add_to_output` makes for ``base_filename``."""
        path = str(layout.output_path(self, base_filename, result_dir))
        return self._resolve_output_file_target(path, target_class=target_class, **kwargs)

    def _resolve_output_file_target(self, filename: str, target_class: type | None = None, **kwargs: Any) -> Any:
        """A target of ``filename``: of ``target_class``, else of the setting ``default_task_target_class``
        (with the setting ``target_class_kwargs`` added to ``kwargs``), else a LocalTarget, as in b2luigi."""
        setting_class = get_setting("default_task_target_class", None, task=self)
        kwargs.update(get_setting("target_class_kwargs", None, task=self) or {})
        chosen = target_class or setting_class
        return chosen(filename, **kwargs) if chosen is not None else LocalTarget(filename, **kwargs)

    def _remove_output_file_target(self, base_filename: str, target_class: type | None = None,
                                   result_dir: str | None = None, **kwargs: Any) -> None:
        """Remove the output target of ``base_filename`` (``NotImplementedError`` for a target that cannot)."""
        target = self._get_output_file_target(base_filename, target_class, result_dir, **kwargs)
        if not hasattr(target, "remove"):
            raise NotImplementedError(f"Task {self}: the output target of {base_filename!r} ({type(target).__name__}) "
                                      f"has no remove(); remove it yourself in the task's remove_output().")
        target.remove()

    def _remove_output(self, target_class: type | None = None, result_dir: str | None = None, **kwargs: Any) -> None:
        """Remove every output of the task; one that cannot be removed is named on stdout, as b2luigi does."""
        for name in self.get_all_output_file_names():
            try:
                self._remove_output_file_target(name, target_class, result_dir, **kwargs)
            except Exception as error:  # b2luigi goes on with the next output
                print(f"Could not remove output file {name}: {error}")

    @staticmethod
    def _remove_directory(directory: str) -> None:
        """Remove ``directory`` with everything in it, if it is there."""
        if os.path.isdir(directory):
            try:
                shutil.rmtree(directory)
            except OSError as error:
                print(f"Could not remove directory {directory}: {error}")

    def remove_log_files(self) -> None:
        """Remove the task's log folder (``<log_dir>/<parameters>/<TaskFamily>``)."""
        self._remove_directory(str(layout.log_folder(self)))

    def remove_task_files(self) -> None:
        """Remove the task's job files folder."""
        from b2batch.luigi_frontend.task_outputs import task_files

        self._remove_directory(str(task_files(self).folder))

    @classmethod
    def grouped_param_names(cls) -> list[str]:
        """The names of the task's parameters declared with ``grouping=True``."""
        return [name for name, param in cls.get_params() if getattr(param, "grouping", False)]

    @classmethod
    def has_grouped_params(cls) -> bool:
        """Whether the task has parameters declared with ``grouping=True``."""
        return bool(cls.grouped_param_names())

    def remove_output(self) -> None:
        """Delete every output of the task (files and folders). With the setting ``b2luigi_texts`` (the
        b2luigi profile) each local output is removed as b2luigi removes it: one that is not there is named on
        stdout (``Could not remove output file ...``)."""
        names = list(self.get_all_output_file_names())
        if not any(is_remote(name) for name in names) and get_setting("b2luigi_texts", task=self):
            self._remove_output()
            return
        settings = FileSettings(self)
        for name in names:
            if is_remote(name):
                from b2batch.remote import outputs

                outputs.remove(name, settings.retry)
            else:
                _remove_path(Path(name))




# --- the parameters of a class, cached -------------------------------------------------------------------

#: Incremented whenever a parameter is set on or removed from a b2batch task class after its creation.
_params_generation = 0


class _Register(Register):
    """luigi's task metaclass, telling the parameter cache of :meth:`_CachedParams.get_params` when a class
    gains or loses a parameter after its creation (``inherits``/``requires``, or user code)."""

    def __setattr__(cls, name: str, value: Any) -> None:
        changes = isinstance(value, luigi.Parameter) or isinstance(getattr(cls, name, None), luigi.Parameter)
        super().__setattr__(name, value)
        if changes:
            _parameters_changed()

    def __delattr__(cls, name: str) -> None:
        changes = isinstance(getattr(cls, name, None), luigi.Parameter)
        super().__delattr__(name)
        if changes:
            _parameters_changed()


def _parameters_changed() -> None:
    global _params_generation
    _params_generation += 1


class _CachedParams:
    """luigi finds a task's parameters by looking at every attribute of its class, several times per task
    (creating it, its id, its parameters as strings): with 100,000 tasks that is most of a dry run's time.
    b2batch's classes find them once per class (again after a parameter is added or removed)."""

    @classmethod
    def get_params(cls) -> list[tuple[str, luigi.Parameter]]:
        cached = cls.__dict__.get("_b2batch_params")
        if cached is not None and cached[0] == _params_generation:
            return list(cached[1])
        params = super().get_params()  # type: ignore[misc]
        type.__setattr__(cls, "_b2batch_params", (_params_generation, tuple(params)))
        return params


class Task(TaskHelpers, _CachedParams, luigi.Task, metaclass=_Register):
    """A luigi Task with b2batch's output helpers and settings."""


class ExternalTask(TaskHelpers, _CachedParams, luigi.ExternalTask, metaclass=_Register):
    """A task whose outputs are made outside the workflow."""


class WrapperTask(TaskHelpers, _CachedParams, luigi.WrapperTask, metaclass=_Register):
    """A task that only requires other tasks."""
