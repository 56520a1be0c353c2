"""Task classes with output-path helpers, and the parameter options ``hashed``, ``hidden`` and ``grouping``.

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
import functools
import inspect
import os
import random
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import luigi
import luigi.parameter
from luigi.task_register import Register

from b2batch import paths
from b2batch.remote.urls import is_remote
from b2batch.settings import get_setting

F = TypeVar("F", bound=Callable[..., Any])


def temporary_name(path: str) -> str:
    """b2luigi's temporary file name of ``path``: ``<base>-luigi-tmp-<10 random digits><extensions>``, the
    base being the name up to its first dot (``a.tar.gz``: ``a-luigi-tmp-0123456789.tar.gz``); a trailing
    slash (a folder target) is kept."""
    name = os.path.basename(path.rstrip("/"))
    base, dot, extensions = name.partition(".")
    number = random.randrange(0, 10_000_000_000)
    return f"{base}-luigi-tmp-{number:010}{dot}{extensions}{'/' if path.endswith('/') else ''}"


class LocalTarget(luigi.LocalTarget):
    """luigi's LocalTarget (re-exported so that b2batch is a drop-in for b2luigi), with b2luigi's
    :attr:`tmp_name`."""

    @property
    def tmp_name(self) -> str:
        """A new temporary file name for this target (a name, no folder), as b2luigi makes it; the outputs of
        ``on_temporary_files`` are written under such names."""
        return temporary_name(str(self.path))


# --- parameters with path options -------------------------------------------------------------------------

class _PathOptions:
    """Adds the options ``hashed`` (a hash of the value in output paths), ``hash_function`` (a function of
    one argument, the value, that gives the text put into output paths instead; it implies ``hashed``),
    ``hidden`` (left out of paths) and b2luigi's ``grouping`` (tasks that differ only in such parameters
    share batch jobs, up to the setting ``max_grouping_size``; see
    :mod:`b2batch.luigi_frontend.grouping`) with ``grouping_function`` (accepted, without effect: b2batch
    never packs values)."""

    def __init__(self, *args: Any, hashed: bool = False, hidden: bool = False,
                 hash_function: Callable[[Any], str] | None = None, grouping: bool = False,
                 grouping_function: Callable[..., Any] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if hash_function is not None:
            if not callable(hash_function) or _positional_arity(hash_function) != 1:
                raise TypeError(f"hash_function must be a function of one argument (the parameter's value), "
                                f"not {hash_function!r}.")
        if grouping not in (True, False):
            raise TypeError(f"grouping must be True or False, not {grouping!r}.")
        if grouping_function is not None and not callable(grouping_function):
            raise TypeError(f"grouping_function must be a function, not {grouping_function!r}.")
        self.hashed = hashed or hash_function is not None
        self.hash_function = hash_function
        self.hidden = hidden
        self.grouping = bool(grouping)
        self.grouping_function = grouping_function


def _positional_arity(function: Callable[..., Any]) -> int:
    """How many arguments ``function`` takes without defaults (1 for a one-argument function)."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: trust it
        return 1
    return sum(1 for p in parameters if p.default is p.empty
               and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


def with_path_options(base: type) -> type:
    """A subclass of the luigi parameter class ``base``, of the same name, with the path options."""
    return type(base.__name__, (_PathOptions, base), {"__module__": "b2batch.parameters", "__doc__": base.__doc__})



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
        path = str(paths.output_path(self, output_file_name, result_dir))
        root = result_dir if result_dir is not None else get_setting("result_dir", task=self)
        if target_class is not None:
            if "root" not in kwargs and _is_remote_target(target_class) and isinstance(root, str) \
                    and (is_remote(root) or root.startswith("/")):
                kwargs["root"] = root  # its result folder: listed at once by batched complete() checks
            return {output_file_name: target_class(path, **kwargs)}
        if is_remote(path):
            from b2batch.remote import outputs

            return {output_file_name: outputs.target_for(path, root=root, task=self)}
        return {output_file_name: LocalTarget(path)}

    def get_output_file_name(self, key: str) -> str:
        """The path of the output named ``key`` (a temporary one inside ``on_temporary_files``)."""
        outputs = _collect(self.output(), {})
        if key not in outputs:
            raise KeyError(f"Task {self} has no output {key!r}; its outputs are {sorted(outputs)}.")
        temporary = getattr(self, "_b2batch_temporary", None)
        if is_remote(outputs[key][0]):  # a local file inside on_temporary_files, uploaded when run() ends
            return str(temporary.path_for_remote(outputs[key][0])) if temporary is not None else outputs[key][0]
        path = Path(outputs[key][0])
        path.parent.mkdir(parents=True, exist_ok=True)
        return str(temporary.path_for(path)) if temporary is not None else str(path)

    def get_all_output_file_names(self) -> Iterator[str]:
        """Every output path of the task."""
        for file_names in _collect(self.output(), {}).values():
            yield from file_names

    def get_input_file_names(self, key: str | None = None) -> dict[str, list[str]] | list[str]:
        """All input paths as ``{key: [paths]}``, or the list of paths of ``key`` across the requirements."""
        inputs = _collect(self.input(), {})
        if key is None:
            return inputs
        if key not in inputs:
            raise KeyError(f"Task {self} has no input {key!r}; its inputs are {sorted(inputs)}.")
        return inputs[key]

    def get_input_file_name(self, key: str) -> str:
        """The one input path of ``key``; an error when the requirements give none or several."""
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

    def remove_output(self) -> None:
        """Delete every output of the task (files and folders)."""
        for name in self.get_all_output_file_names():
            if is_remote(name):
                from b2batch.remote import outputs

                outputs.remove(name, task=self)
            else:
                _remove_path(Path(name))


def _remove_path(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


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


# --- atomic outputs --------------------------------------------------------------------------------------

class _TemporaryOutputs:
    """Temporary paths for outputs, moved into place only on success."""

    def __init__(self, scratch_dir: str | None) -> None:
        self._scratch = paths.resolve(scratch_dir) if scratch_dir else None
        self._made: dict[Path, Path] = {}
        self._folders: list[Path] = []  # the temporary folders made under scratch_dir
        self._remote: dict[str, Path] = {}  # remote URL: local temporary file

    def path_for_remote(self, url: str) -> Path:
        if url not in self._remote:
            folder = Path(tempfile.mkdtemp(prefix="b2batch-upload-", dir=self._scratch))
            self._remote[url] = folder / url.rsplit("/", 1)[-1]
        return self._remote[url]

    def path_for(self, final: Path) -> Path:
        """The temporary path of the output ``final``: b2luigi's temporary name (:func:`temporary_name`), in
        a folder of its own under scratch_dir when that is set, else next to ``final``."""
        if final not in self._made:
            if self._scratch is not None:
                self._scratch.mkdir(parents=True, exist_ok=True)
                folder = Path(tempfile.mkdtemp(prefix="b2batch-", dir=self._scratch))
                self._folders.append(folder)
            else:
                folder = final.parent
                folder.mkdir(parents=True, exist_ok=True)
            temporary = folder / temporary_name(final.name)
            while temporary.exists() or temporary in self._made.values():
                temporary = folder / temporary_name(final.name)
            self._made[final] = temporary  # the task creates the file (or folder) itself
        return self._made[final]

    def commit(self) -> None:
        if self._remote:
            from b2batch.remote import outputs

            for url, local in self._remote.items():
                if local.exists():
                    outputs.upload(str(local), url)
                shutil.rmtree(local.parent, ignore_errors=True)
        for final, temporary in self._made.items():
            if temporary.exists():
                final.parent.mkdir(parents=True, exist_ok=True)
                if final.exists() and final.is_dir():
                    shutil.rmtree(final)
                shutil.move(str(temporary), str(final))
        self._remove_folders()

    def _remove_folders(self) -> None:
        for folder in self._folders:
            shutil.rmtree(folder, ignore_errors=True)

    def discard(self) -> None:
        for local in self._remote.values():
            shutil.rmtree(local.parent, ignore_errors=True)
        for temporary in self._made.values():
            with contextlib.suppress(FileNotFoundError):
                _remove_path(temporary)
        self._remove_folders()


def on_temporary_files(run: F | None = None, *, inputs: bool = True, outputs: bool = True) -> Any:
    """Decorate ``run()`` so that its outputs are written to temporary paths and moved into place only when
    it returns normally; when it raises, the temporary files are removed and no partial output remains.

    Also with b2luigi 1.3's options, ``@on_temporary_files(outputs=False)``: outputs are then written in
    place. ``inputs`` is accepted; b2batch reads inputs where they are (b2luigi copies them to scratch)."""
    if run is None:
        return functools.partial(on_temporary_files, inputs=inputs, outputs=outputs)
    if not outputs:
        return run

    @functools.wraps(run)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        temporary = _TemporaryOutputs(get_setting("scratch_dir", task=self))
        self._b2batch_temporary = temporary
        try:
            result = run(self, *args, **kwargs)
        except BaseException:
            temporary.discard()
            raise
        finally:
            self._b2batch_temporary = None
        temporary.commit()
        return result

    return wrapper  # type: ignore[return-value]


# --- requires / inherits with b2luigi's signatures -------------------------------------------------------

def requires(*tasks_to_require: type, **kwargs: Any) -> Callable[[type], type]:
    """Class decorator: the task requires each of ``tasks_to_require`` with its own parameters, inheriting
    them; keyword arguments fix parameter values of the required tasks (they are then not inherited)."""

    def decorate(task_class: type) -> type:
        for required in tasks_to_require:
            for name, param in required.get_params():
                if name not in kwargs and not hasattr(task_class, name):
                    setattr(task_class, name, param)

        def requires_method(self: Any) -> Iterable[Any]:
            for required in tasks_to_require:
                yield self.clone(required, **kwargs)

        task_class.requires = requires_method
        return task_class

    return decorate


def inherits(*tasks_to_inherit: type, without: str | Iterable[str] | None = None) -> Callable[[type], type]:
    """Class decorator: the task gets the parameters of ``tasks_to_inherit``, except those in ``without``."""
    excluded = {without} if isinstance(without, str) else set(without or ())

    def decorate(task_class: type) -> type:
        for inherited in tasks_to_inherit:
            for name, param in inherited.get_params():
                if name not in excluded and not hasattr(task_class, name):
                    setattr(task_class, name, param)
        return task_class

    return decorate
