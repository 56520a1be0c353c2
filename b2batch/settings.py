"""The settings hierarchy: one ordered chain of sources, first value wins.

A setting is looked up in this order:

1. the task's own attribute, property or zero-argument method of that name;
2. values set in code with :func:`set_setting`;
3. ``settings.json`` files: the file named by ``$B2BATCH_SETTINGS`` (or b2luigi's
   ``$B2LUIGI_SETTINGS_JSON``) if set, else every ``settings.json`` from the working directory up to the
   root, the nearest one winning, then those from the workflow script's folder up to the root (so a
   script finds the settings.json beside it wherever it is started from);
4. the ``default`` passed to :func:`get_setting`;
5. the default of the process's profile (:data:`PROFILES`): a workflow written against b2luigi (one that
   imported ``b2luigi`` through the shim, or ``b2batch.compat.b2luigi``) gets b2luigi 1.3's defaults;
6. the default declared in :data:`SETTINGS`.

Every setting b2batch knows is declared once, in :data:`SETTINGS`; ``settings.json.example`` and the docs'
settings reference are generated from it (``python -m b2batch.settings --example``).
"""

from __future__ import annotations

import difflib
import functools
import json
import logging
import os
import stat
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable, Iterable
from typing import Any

from b2batch.errors import SettingError

logger = logging.getLogger(__name__)

SETTINGS_ENV_VARS = ("B2BATCH_SETTINGS", "B2LUIGI_SETTINGS_JSON")
SETTINGS_FILE_NAME = "settings.json"
_NOT_SET: Any = object()


class Kind:
    """What values a setting takes: a check that converts an acceptable value (e.g. the string "2" of a
    whole number) and refuses others with what was expected."""

    def __init__(self, expects: str, accept: Callable[[Any], Any]) -> None:
        self.expects = expects
        self.accept = accept

    def __call__(self, value: Any) -> Any:
        return self.accept(value)


def _number(integer: bool = False, minimum: float | None = None, above: float | None = None,
            none: bool = False) -> Kind:
    what = "a whole number" if integer else "a number"
    if minimum is not None:
        what += f" of at least {minimum:g}"
    if above is not None:
        what += f" above {above:g}"
    if none:
        what += ", or null for none"

    def accept(value: Any) -> Any:
        if value is None and none:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ValueError
        number = (int(value) if integer else float(value)) if isinstance(value, str) else value
        if integer and number != int(number):
            raise ValueError
        if (minimum is not None and number < minimum) or (above is not None and number <= above):
            raise ValueError
        return int(number) if integer else number

    return Kind(what, accept)


def _of(types: tuple[type, ...], expects: str, none: bool = True) -> Kind:
    def accept(value: Any) -> Any:
        if (value is None and none) or isinstance(value, types):
            return value
        raise ValueError

    return Kind(expects + (", or null" if none else ""), accept)


def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise ValueError


PATH = _of((str, os.PathLike), "a path (a string)")
FOLDER = _of((str, os.PathLike), "a path (a string)", none=False)
TEXT = _of((str,), "a string")
DICT = _of((dict,), "a dict (a JSON object)", none=False)
LIST = _of((list, tuple), "a list", none=False)
FLAG = Kind("true or false", _flag)
SECONDS = _number(minimum=0)


@dataclass(frozen=True)
class Setting:
    """One declared setting: its name, default, what it means, and what values it takes."""

    name: str
    default: Any
    help: str
    required: bool = False
    kind: Kind | None = None


SETTINGS: dict[str, Setting] = {
    s.name: s
    for s in [
        # Where things go.
        Setting("result_dir", "results", "Folder of the task outputs; relative paths are relative to the "
                "workflow script's folder.", kind=FOLDER),
        Setting("log_dir", "logs", "Folder of the per-task job logs (stdout, stderr).", kind=FOLDER),
        Setting("task_file_dir", "task_files", "Folder of the job files: wrappers, submit files, exit-code "
                "and result files, the run journal.", kind=FOLDER),
        Setting("scratch_dir", None, "Folder for temporary files of on_temporary_files(); default: next to "
                "each output.", kind=PATH),
        Setting("parameter_separator", "=", "Text between a parameter's name and value in output paths.", kind=TEXT),
        Setting("use_parameter_name_in_output", True, "Put 'name=value' (true) or only the value (false) "
                "into output paths.", kind=FLAG),
        # How jobs run.
        Setting("batch_system", "auto", "Where --batch sends a task: local, slurm, sge, htcondor, lsf, auto "
                "(the first of bsub, condor_submit, sbatch, qsub found on PATH, else local), or a plugin's name."),
        Setting("env_script", None, "A shell script sourced by every job before the task runs.", kind=PATH),
        Setting("env", {}, "Environment variables exported by every job: a dict of name to value.", kind=DICT),
        Setting("executable", None, "The command that runs the workflow script in a job, as a list or a "
                "string; default: the Python interpreter running the workflow."),
        Setting("working_dir", None, "Folder a job changes into before it runs; default: the workflow "
                "script's folder.", kind=PATH),
        Setting("job_name", None, "Name of the task's job on the batch system; default: the task family.", kind=TEXT),
        Setting("shell", "bash", "Shell that runs the job wrapper.", kind=TEXT),
        Setting("workers", 1, "luigi workers of process(): tasks (or jobs) that run at once (b2luigi's setting; "
                "--workers and process(workers=...) win).", kind=_number(integer=True, minimum=1)),
        Setting("local_slots", None, "Jobs the local batch system runs at once; 0 or null: the number of "
                "CPUs.", kind=_number(integer=True, minimum=0, none=True)),
        Setting("poll_interval", 1.0, "Seconds between status queries of a batch system at the start of a "
                "run.", kind=SECONDS),
        Setting("max_poll_interval", 30.0, "Longest wait between status queries while nothing changes.",
                kind=_number(above=0)),
        Setting("max_resubmissions", 2, "How often a job that failed for a scheduler-side reason (node "
                "failure, preemption, a held or lost job) is submitted again.", kind=_number(integer=True, minimum=0)),
        Setting("resubmit_failed_tasks", False, "Also submit again jobs whose task itself failed (up to "
                "max_resubmissions times).", kind=FLAG),
        Setting("exit_on_failure", True, "A run in which a task failed ends the script with exit status 1 "
                "(false: process() returns luigi's result and the script goes on, as in b2luigi; process()'s "
                "argument exit_on_failure wins).", kind=FLAG),
        Setting("b2luigi_hashing", False, "Parameters with hashed=True stand in paths for hashed_ and the md5 of "
                "str(value), and hash_function applies only with hashed=True, as in b2luigi 1.3 (false: the md5 of "
                "the serialized value, and hash_function implies hashed; the same for strings and numbers). "
                "b2luigi profile: true.", kind=FLAG),
        Setting("b2luigi_texts", False, "--dry-run, --show-output, --remove and --remove-only as in b2luigi 1.3: "
                "--dry-run counts external tasks too and exits with 0, --remove CLASS also removes what needs its "
                "tasks, and nothing runs after a removal (b2luigi profile: true).", kind=FLAG),
        Setting("local_runs_send_jobs", False, "Without --batch, a task whose class or instance names its own "
                "batch_system (other than local) still runs as a job there, the others in the script's process, "
                "as in b2luigi (b2luigi profile: true).", kind=FLAG),
        Setting("process_once", False, "A second process() call in a script raises RuntimeError (b2luigi profile: "
                "true, as b2luigi allows one call).", kind=FLAG),
        Setting("process_returns_result", True, "process() returns luigi's run result (false: None, as b2luigi's "
                "process(); b2luigi profile: false).", kind=FLAG),
        Setting("run_summary", True, "At the end of process(): b2batch's summary on stderr and, after a --batch "
                "run, the timeline and the JSON report in log_dir (b2luigi profile: false; luigi's own summary is "
                "printed either way).", kind=FLAG),
        Setting("unknown_setting_warnings", True, "A warning line for each name in a settings.json or set_setting() "
                "that is no setting of b2batch (a likely typo stops the run either way). Read from set_setting() "
                "only (b2luigi profile: false).", kind=FLAG),
        Setting("max_jobs_in_flight", None, "Most jobs of one batch system submitted and not yet over, "
                "whatever luigi's workers; more wait in b2batch. None: no limit.",
                kind=_number(integer=True, minimum=1, none=True)),
        Setting("max_scheduler_calls_per_second", 5.0, "Cap on scheduler commands (submit, status, cancel) "
                "per second, for each batch system of a run.", kind=_number(above=0)),
        Setting("max_array_size", 1000, "Most jobs submitted together as one job array.",
                kind=_number(integer=True, minimum=1)),
        Setting("submission_window", 2.0, "Seconds a job that is ready to go waits for more ready tasks to "
                "join its job array while luigi still starts tasks; the wait doubles while the start goes on, "
                "and a full array (max_array_size) goes at once. 0 submits every job alone at once.", kind=SECONDS),
        Setting("scheduler_unreachable_timeout", 600.0, "Seconds a batch system may keep failing (submit "
                "or status commands) before its jobs fail with its last error.", kind=SECONDS),
        Setting("scheduler_call_timeout", 60.0, "Seconds a scheduler command (submit, status, cancel) may take; one "
                "that takes longer counts as a transient failure and is tried again.", kind=_number(above=0)),
        Setting("output_wait_timeout", 30.0, "Seconds to wait for outputs of a succeeded job to appear on "
                "the submit host (shared file systems) before the task fails.", kind=SECONDS),
        Setting("remote_retries", 6, "Tries of each operation on remote outputs (a root:// or davs:// result_dir, "
                "XRootD and WebDAV targets) before it fails; the waits between tries double from 0.5 s to 8 s.",
                kind=_number(integer=True, minimum=1)),
        # Per batch system.
        Setting("slurm_settings", {}, "Extra sbatch options, e.g. {\"cpus-per-task\": 2, \"mem\": \"2G\"}.", kind=DICT),
        Setting("sge_settings", {}, "Extra qsub options: queue, pe (\"smp 2\"), resources ({\"h_rt\": "
                "\"01:00:00\"}).", kind=DICT),
        Setting("htcondor_settings", {}, "Extra submit description commands, e.g. {\"request_cpus\": 2}.", kind=DICT),
        Setting("htcondor_pool", None, "HTCondor collector (host[:port]) whose schedd takes the jobs: condor_submit, "
                "condor_q, condor_history and condor_rm get -pool; default: the local configuration's.", kind=TEXT),
        Setting("htcondor_schedd", None, "Name of the HTCondor schedd that takes the jobs (-name of the condor_* "
                "commands); default: the local one.", kind=TEXT),
        Setting("transfer_files", [], "Files HTCondor transfers to the node (transfer_input_files).", kind=LIST),
        Setting("queue", None, "LSF queue (bsub -q).", kind=_of((str, int), 'a queue name')),
        Setting("job_slots", None, "LSF job slots (bsub -n).", kind=_number(integer=True, minimum=1, none=True)),
        Setting("lsf_settings", {}, "Extra bsub options, e.g. {\"W\": \"60\", \"R\": \"rusage[mem=2000]\"}.",
                kind=DICT),
        # Containers (docs/containers.md).
        Setting("container", None, "Run every job's command in a container: a dict with engine (apptainer, "
                "singularity, podman, docker), image, mounts (host paths, \"host[:container[:options]]\"), "
                "mount_defaults (true: also mount the working, result, log and job folders), options (more arguments "
                "of the engine) and executable (the engine's command).", kind=_of((dict,), "a dict (a JSON object)")),
        Setting("apptainer_image", None, "b2luigi's: run the job in this Apptainer/Singularity image (the "
                "batch_system 'apptainer' needs it).", kind=TEXT),
        Setting("apptainer_mounts", [], "b2luigi's: folders mounted into the apptainer_image container.", kind=LIST),
        Setting("apptainer_mount_defaults", True, "b2luigi's: also mount the folders the job needs (result, log, "
                "job and working folders).", kind=FLAG),
        Setting("apptainer_additional_params", "", "b2luigi's: more arguments of 'apptainer exec', as shell words.",
                kind=TEXT),
        Setting("apptainer_cmd", None, "b2luigi's: the command that runs apptainer_image containers: apptainer or "
                "singularity (default: the first of them on PATH).", kind=TEXT),
        # Many tasks per job.
        Setting("tasks_per_job", 1, "Tasks that are ready together run one after another in one batch job, up "
                "to this many (bundles).", kind=_number(integer=True, minimum=1)),
        Setting("pilot_jobs", 0, "Pilot jobs per batch system that pull ready tasks from a queue on the shared "
                "file system until no work is left (0: no pilots).", kind=_number(integer=True, minimum=0)),
        Setting("pilot_idle_timeout", 60.0, "Seconds a pilot waits with nothing to claim before it ends (a new one "
                "is submitted when work comes).", kind=SECONDS),
        Setting("pilot_walltime", None, "Seconds a pilot job may run (default: the scheduler's end time of the "
                "job where it says, else unlimited); a pilot claims no task it could not finish in time.",
                kind=_number(above=0, none=True)),
        Setting("pilot_task_seconds", None, "Seconds a task needs at most in a pilot (default: the longest task "
                "that pilot ran so far).", kind=_number(above=0, none=True)),
        Setting("heartbeat_timeout", 60.0, "Seconds without a heartbeat after which a pilot or bundle job counts "
                "as lost and its task is run again elsewhere.", kind=_number(minimum=1)),
        Setting("max_grouping_size", 1, "b2luigi's parameter grouping: tasks of a class that differ only in its "
                "parameters with grouping=True run one after another in one batch job, up to this many (a bundle, "
                "on every batch system); 1: no grouping.", kind=_number(integer=True, minimum=1)),
    ]
}


#: Defaults layers, one per kind of workflow, between the ``default`` passed to :func:`get_setting` and the
#: declared defaults. ``b2luigi``: b2luigi 1.3's defaults, for a workflow written against b2luigi (outputs
#: in the script's folder, process() returns when a task failed, temporary outputs in the system's
#: temporary folder, no b2batch summary, timeline or report that b2luigi would not print or write).
PROFILES: dict[str, dict[str, Any]] = {
    "b2batch": {},
    "b2luigi": {"result_dir": ".", "exit_on_failure": False, "scratch_dir": tempfile.gettempdir(),
                "run_summary": False, "unknown_setting_warnings": False, "b2luigi_hashing": True,
                "process_returns_result": False, "b2luigi_texts": True,
                "process_once": True, "local_runs_send_jobs": True},
}
_profile = "b2batch"  # the process's profile: the one choice of this kind (use_profile)


def use_profile(name: str) -> None:
    """Choose the process's defaults layer (:data:`PROFILES`); importing ``b2luigi`` (the shim) or
    ``b2batch.compat.b2luigi`` chooses ``b2luigi``. Settings given anywhere else still win."""
    global _profile
    if name not in PROFILES:
        raise SettingError(f"Unknown settings profile {name!r}; the profiles are {', '.join(PROFILES)}.")
    _profile = name


def active_profile() -> str:
    """The name of the process's defaults layer (see :func:`use_profile`)."""
    return _profile


#: Profiles whose errors for bad input carry the name of the builtin exception their tool raises.
_BUILTIN_NAMED_ERRORS = {"b2luigi"}


@functools.cache
def _builtin_named(error_class: type[Exception]) -> type[Exception]:
    builtin = next(c for c in error_class.__mro__ if c.__module__ == "builtins" and c not in (Exception, BaseException,
                                                                                              object))
    return type(builtin.__name__, (error_class,), {"__module__": "builtins", "__qualname__": builtin.__name__,
                                                     "__doc__": f"{error_class.__name__}, under b2luigi's name."})


def profiled_error(error_class: type[Exception]) -> type[Exception]:
    """The class to raise for b2batch's ``error_class`` (e.g. :class:`SettingError`) under the process's
    profile: itself, or under the b2luigi profile a subclass of it that is named and printed as the builtin
    exception b2luigi raises there (``ValueError``): ``except ValueError``, ``except SettingError`` and
    ``type(error).__name__`` all see what they expect, and the message stays b2batch's."""
    return _builtin_named(error_class) if _profile in _BUILTIN_NAMED_ERRORS else error_class


def default_of(key: str) -> Any:
    """The default of the declared setting ``key`` under the process's profile."""
    layer = PROFILES[_profile]
    return layer[key] if key in layer else SETTINGS[key].default


class DeprecatedSettingsWarning(DeprecationWarning):
    """A setting was found under a former (b2luigi) name; the message names the current one."""


#: Former names of settings (b2luigi's), still read under their current name with a
#: :class:`DeprecatedSettingsWarning`.
RENAMED_SETTINGS = {"result_path": "result_dir", "log_folder": "log_dir"}
_FORMER_NAMES = {new: tuple(o for o, n in RENAMED_SETTINGS.items() if n == new) for new in RENAMED_SETTINGS.values()}


class _SettingsFiles:
    """settings.json files found from a folder upward, parsed once and re-read when they change.

    Each lookup stats the settings files there are and the working directory (whose time stamp changes when
    a file is made or removed in it): a file changed, or written into the working directory, while the
    process runs is seen at the next lookup, as b2luigi reads the files at each lookup; every place a file may
    be (one ``stat`` per folder up to the root) is looked at again when the working directory changed, and at
    least once a second. The files are parsed again only when one's mtime or size changed (or one appeared
    or went away)."""

    RESCAN_INTERVAL = 1.0  # seconds between looks at every place (files made in folders above the working one)

    def __init__(self) -> None:
        self._key: tuple[Any, ...] | None = None
        self._places: tuple[str, ...] = ()
        self._stamps: tuple[tuple[int, int, int], ...] = ()
        self._present: tuple[tuple[str, tuple[int, int, int]], ...] = ()  # the files there are, with stamps
        self._folder_stamp: tuple[int, int, int] | None = None
        self._scanned_at = 0.0
        self._merged: dict[str, Any] = {}
        self.pinned: list[str] | None = None  # set in jobs: the files the steering process used

    def _candidates(self) -> tuple[str, ...]:
        if self.pinned is not None:
            return tuple(self.pinned)
        for var in SETTINGS_ENV_VARS:
            if os.environ.get(var):
                return (os.environ[var],)
        here = Path.cwd()
        folders = [here, *here.parents]
        script = getattr(sys.modules.get("__main__"), "__file__", None)
        if script:  # then the workflow script's folder and its parents, so that it runs from anywhere
            there = Path(os.path.abspath(script)).parent
            folders += [p for p in (there, *there.parents) if p not in folders]
        return tuple(str(p / SETTINGS_FILE_NAME) for p in folders)

    def _named(self) -> bool:
        """Whether the files are named (by the steering process or an environment variable), not searched."""
        return self.pinned is not None or any(os.environ.get(var) for var in SETTINGS_ENV_VARS)

    def _locate(self) -> list[Path]:
        return [Path(f) for f in self._candidates() if os.path.isfile(f)]

    def get(self) -> dict[str, Any]:
        cwd = os.getcwd()
        key = (cwd, _environment_key(), self.pinned is None, getattr(sys.modules.get("__main__"), "__file__", None))
        now = time.monotonic()
        folder = _stamp(cwd)
        if (key == self._key and folder == self._folder_stamp and now - self._scanned_at < self.RESCAN_INTERVAL
                and all(_stamp(place) == stamp for place, stamp in self._present)):
            return self._merged  # nothing changed: one stat of the working directory and one per file
        if key != self._key:
            self._places = self._candidates()
        stamps = tuple(_stamp(place) for place in self._places)
        if key != self._key or stamps != self._stamps:
            merged: dict[str, Any] = {}
            for place, stamp in reversed(list(zip(self._places, stamps))):  # nearest file last, so it wins
                if (stamp[0] >= 0 and stat.S_ISREG(stamp[2])) or self._named():  # a named file must be there
                    merged.update(_read_settings_file(Path(place)))
            self._key, self._stamps, self._merged = key, stamps, merged
        self._present = tuple((place, stamp) for place, stamp in zip(self._places, stamps) if stamp[0] >= 0)
        self._folder_stamp, self._scanned_at = folder, now
        return self._merged

    def files(self) -> list[Path]:
        return self._locate()


_ENCODED_ENV_VARS = tuple(os.fsencode(v) for v in SETTINGS_ENV_VARS)


def _environment_key() -> tuple[Any, ...]:
    """The values of the settings-file variables: looked up thousands of times a second while tasks are handed
    out, so read from os.environ's bytes mapping where CPython has one (os.environ.get encodes every key)."""
    data = getattr(os.environ, "_data", None)
    if isinstance(data, dict):
        return tuple(data.get(v) for v in _ENCODED_ENV_VARS)
    return tuple(os.environ.get(v) for v in SETTINGS_ENV_VARS)


def _stamp(path: str) -> tuple[int, int, int]:
    """The mtime, size and mode of the file at ``path``; (-1, -1, 0) when there is none."""
    try:
        st = os.stat(path)
    except OSError:
        return (-1, -1, 0)
    return (st.st_mtime_ns, st.st_size, st.st_mode)


def _read_settings_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
    except OSError as e:
        raise SettingError(f"Cannot read the settings file {path}: {e}. Fix its permissions, or unset "
                           f"{'/'.join(SETTINGS_ENV_VARS)} if it names a file that is not there.") from e
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise SettingError(f"The settings file {path} is not valid JSON: {e.msg} at line {e.lineno}, column "
                           f"{e.colno}. Fix the file (settings.json.example shows every setting).") from e
    if not isinstance(data, dict):
        raise SettingError(f"The settings file {path} must hold one JSON object of setting names to values, "
                           f"not {type(data).__name__}.")
    # "_x" names are comments
    check_setting_names([name for name in data if not name.startswith("_")], f"the settings file {path}")
    return data


#: How alike (difflib's ratio) an unknown name must be to a known one to count as its misspelling.
TYPO_CUTOFF = 0.8


def closest_name(name: str, known: Iterable[str], cutoff: float = TYPO_CUTOFF) -> str | None:
    """The known name that ``name`` most likely misspells, or None when none is that close."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=cutoff)
    return close[0] if close else None


def unknown_setting_message(name: str, where: str, known: Iterable[str] | None = None, what: str = "setting") -> str:
    """One line for an unknown setting (or option) name: where it was given, the closest known name, and the
    known names (``known``: a front-end's own list; default: the declared settings)."""
    names = sorted(SETTINGS) if known is None else sorted(set(known))
    close = closest_name(name, names, cutoff=0.6)
    hint = f" Did you mean {close!r}?" if close else ""
    return f"Unknown {what} {name!r} {where}.{hint} Known {what}s: {', '.join(names)}."


def check_setting_names(names: Iterable[str], where: str, known: Iterable[str] | None = None,
                        what: str = "setting") -> None:
    """Check names given as settings (or a front-end's options) in the place ``where`` (e.g. "the settings file
    /x/settings.json", "set_setting()", "the joblib backend b2batch"). A name close to a known one (a likely
    typo: ``batch_sytem``) raises :class:`SettingError` with one line naming the place, the name, the name
    meant and the known names, so that the run stops before anything is submitted; any other unknown name
    (e.g. a user's own setting read with get_setting) gets one short warning line. ``known``: the names the
    front-end takes (default: the declared settings and their former names)."""
    names = list(names)
    known_names = sorted({*SETTINGS, *RENAMED_SETTINGS} if known is None else set(known))
    for name in names:
        if name in known_names:
            continue
        meant = closest_name(name, known_names)
        if meant is not None:
            raise SettingError(f"In {where}: {name!r} is not a known {what}. Did you mean {meant!r}? Rename it "
                               f"(known {what}s: {', '.join(known_names)}).")
    if not _code_settings.get("unknown_setting_warnings", default_of("unknown_setting_warnings")):
        return  # the b2luigi profile: a workflow's own settings are usual there, and b2luigi says nothing
    for name in names:
        if name not in known_names:
            logger.warning("%s", f"In {where}: {name!r} is not a {what} b2batch knows; it is ignored unless your "
                                 f"code reads it with get_setting().")


def _code_uses(klass: type, name: str) -> bool:
    """Whether code of ``klass`` (its functions, properties, nested functions) reads or writes ``name`` as an
    attribute or variable: then an attribute of that name is the task's own, not a misspelt setting."""
    stack = []
    for value in vars(klass).values():
        value = getattr(value, "__func__", value)  # classmethod, staticmethod
        if isinstance(value, property):
            stack += [f.__code__ for f in (value.fget, value.fset, value.fdel) if hasattr(f, "__code__")]
        elif hasattr(value, "__code__"):
            stack.append(value.__code__)
    while stack:
        code = stack.pop()
        if name in code.co_names or name in code.co_varnames:
            return True
        stack += [c for c in code.co_consts if hasattr(c, "co_names")]
    return False


def _takes_arguments(value: Any) -> bool:
    """Whether ``value`` is a function that takes arguments besides ``self``: a method, never a setting (a
    setting may be a zero-argument method)."""
    import inspect

    function = getattr(value, "__func__", value)
    if not inspect.isfunction(function):
        return False
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return False
    if not isinstance(value, staticmethod):
        parameters = parameters[1:]
    return any(p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
               for p in parameters)


#: Modules whose classes' attributes are the framework's own, never a user's misspelt setting.
_FRAMEWORK_MODULES = ("luigi", "b2batch", "b2luigi")


def misspelt_settings(cls: type, stop: tuple[type, ...] = (),
                      own: Callable[[str, Any], bool] | None = None) -> list[tuple[str, str]]:
    """Attributes of the task class ``cls`` (and its user-written bases; not ``stop`` and what comes after it,
    nor classes of luigi, b2batch or b2luigi) that look like a misspelt setting (``htcondor_setings``), as
    (attribute, setting meant). Not counted: names close to no setting, names the class's own code uses
    (``self.queues`` in ``run()``), methods that take arguments, and attributes ``own(name, value)`` says are
    the task's (e.g. luigi parameters)."""
    found: dict[str, str] = {}
    classes = []
    for klass in cls.__mro__:
        if klass in stop or klass is object:
            break
        if klass.__module__.split(".")[0] not in _FRAMEWORK_MODULES:
            classes.append(klass)
    for klass in classes:
        for name, value in vars(klass).items():
            if name.startswith("_") or name in SETTINGS or name in RENAMED_SETTINGS or name in found:
                continue
            meant = closest_name(name, SETTINGS, cutoff=0.85)
            if meant is None or (own is not None and own(name, value)) or _takes_arguments(value):
                continue
            if any(_code_uses(k, name) for k in classes):
                continue
            found[name] = meant
    return list(found.items())


def misspelt_setting_error(cls: type, name: str, meant: str) -> str:
    """The one line that stops a run whose task class ``cls`` has the attribute ``name`` for the setting ``meant``."""
    return (f"Task class {cls.__name__}: the attribute {name!r} is not a setting b2batch knows. Did you mean "
            f"{meant!r}? Rename it (or, if it is the task's own value, give it a name further from the settings: "
            f"{', '.join(sorted(SETTINGS))}).")


_files = _SettingsFiles()
_code_settings: dict[str, Any] = {}


def set_setting(key: str, value: Any) -> None:
    """Set a setting for all tasks, taking precedence over settings.json and defaults."""
    known = {*SETTINGS, *RENAMED_SETTINGS}
    if key not in known and closest_name(key, known) is None:
        check_setting_names([key], "set_setting()")  # one warning line; a likely typo stops check_settings()
    _code_settings[key] = value


def clear_setting(key: str) -> None:
    """Remove a setting set with :func:`set_setting`; nothing happens if it was not set."""
    _code_settings.pop(key, None)


def _from_task(task: Any, key: str) -> Any:
    if task is None:
        return _NOT_SET
    try:
        value = getattr(task, key)
    except AttributeError:
        return _NOT_SET
    # A zero-argument method of the task computes the setting (e.g. ``def env(self): ...``).
    if callable(value) and getattr(value, "__self__", None) is task:
        value = value()
    return value


def find_setting(key: str, task: Any = None, former_names: tuple[str, ...] = ()) -> Any:
    """The value of ``key`` set on ``task``, in code or in a settings file (no defaults), checked against
    its declared kind; a value found under one of ``former_names`` or of b2luigi's former names of ``key``
    warns with :class:`DeprecatedSettingsWarning`. Raises ``KeyError`` when none is set, and
    :class:`SettingError` (naming the task, the setting, the value, where it was set and what it must be)
    when the value is of the wrong kind."""
    files: dict[str, Any] | None = None  # the settings files, looked at once per lookup and only if needed
    for name in (key, *former_names, *_FORMER_NAMES.get(key, ())):
        for where in range(3):  # each source looked at only when the ones before lack the setting
            if where == 2 and files is None:
                files = _files.get()
            value = (_from_task(task, name) if where == 0 else _code_settings.get(name, _NOT_SET) if where == 1
                     else files.get(name, _NOT_SET))  # type: ignore[union-attr]
            if value is _NOT_SET:
                continue
            if name != key:
                warnings.warn(f"The setting with the name {name} is deprecated. Please use {key} instead. Future "
                              f"versions might remove this setting.", DeprecatedSettingsWarning, stacklevel=3)
            declared = SETTINGS.get(key)
            if declared is None or declared.kind is None:
                return value
            try:
                return declared.kind(value)
            except (ValueError, TypeError, OverflowError):
                raise profiled_error(SettingError)(_wrong_kind(key, name, value, task, where, declared.kind)) from None
    raise KeyError(key)


def _wrong_kind(key: str, name: str, value: Any, task: Any, where: int, kind: Kind) -> str:
    source = [f"as an attribute of task {task}", "with b2batch.set_setting()",
              f"in {', '.join(str(f) for f in _files.files()) or 'settings.json'}"][where]
    owner = f"Task {task}: the" if task is not None else "The"
    return (f"{owner} setting {key!r} is {value!r} (set {source}{'' if name == key else f' as {name!r}'}), "
            f"but it must be {kind.expects}. Fix the value there, e.g. {key!r}: "
            f"{json.dumps(default_of(key), default=str)} (its default).")


def get_setting(key: str, default: Any = _NOT_SET, task: Any = None) -> Any:
    """The value of setting ``key`` for ``task`` (or globally), following the chain in this module's doc.

    Raises :class:`SettingError` when no source has a value and no default exists.
    """
    try:
        return find_setting(key, task)
    except KeyError:
        pass
    if default is not _NOT_SET:
        return default
    declared = SETTINGS.get(key)
    if declared is not None and not declared.required:
        return default_of(key)
    owner = f" of task {task}" if task is not None else ""
    raise profiled_error(SettingError)(
        f"No value for the setting {key!r}{owner}. Set it as an attribute of the task, with "
        f"b2batch.set_setting({key!r}, ...), or in a settings.json in the working directory or a parent "
        f"(or the file named by ${SETTINGS_ENV_VARS[0]})."
    )


def check_settings() -> None:
    """Check every setting set in code or in settings files now, so that a misspelt name (see
    :func:`check_setting_names`) or a wrong value stops a run before it starts (task attributes are checked
    when a task's setting is looked up). Raises :class:`SettingError`."""
    _files.get()  # the files' names are checked as they are read
    for key in _code_settings:
        if key not in SETTINGS and key not in RENAMED_SETTINGS and closest_name(key, {*SETTINGS, *RENAMED_SETTINGS}):
            check_setting_names([key], f"b2batch.set_setting({key!r}, ...)")
    for key in SETTINGS:
        try:
            find_setting(key)
        except KeyError:
            pass


def load_settings_files() -> dict[str, Any]:
    """The merged settings of the settings files, read now: a file that is not valid JSON raises
    :class:`SettingError` here (naming the file and the line) rather than later, from inside luigi."""
    return dict(_files.get())


def settings_snapshot() -> dict[str, Any]:
    """The code-set settings and the settings-file path, for handing the same settings to a job."""
    return {"code": dict(_code_settings), "files": [str(f) for f in _files.files()], "profile": _profile}


def use_settings_snapshot(snapshot: dict[str, Any]) -> None:
    """Use the settings of the steering process (see :func:`settings_snapshot`) in a job."""
    use_profile(snapshot.get("profile", _profile))
    _code_settings.update(snapshot.get("code", {}))
    _files.pinned = list(snapshot.get("files", []))
    _files._key = None


def example_settings() -> str:
    """The text of settings.json.example: every declared setting with its default (under the process's
    profile, named first when it is not b2batch's) and meaning."""
    lines = ["{"]
    if _profile != "b2batch":
        note = f"profile {_profile}: these defaults are {_profile} 1.3's where it has the setting"
        lines.append(f'  "_profile": {json.dumps(note)},')
    items = list(SETTINGS.values())
    for i, s in enumerate(items):
        lines.append(f'  "_{s.name}": {json.dumps(s.help)},')
        comma = "," if i < len(items) - 1 else ""
        lines.append(f'  "{s.name}": {json.dumps(default_of(s.name))}{comma}')
    lines.append("}")
    return "\n".join(lines) + "\n"


def settings_reference_markdown() -> str:
    """The settings reference of the docs, as a Markdown table."""
    rows = ["| Setting | Default | Takes | Meaning |", "| --- | --- | --- | --- |"]
    for s in SETTINGS.values():
        takes = s.kind.expects if s.kind is not None else "see the meaning"
        rows.append(f"| `{s.name}` | `{json.dumps(s.default)}` | {takes} | {s.help} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":  # pragma: no cover - a generator for the docs and the example file
    if "--markdown" in sys.argv:
        sys.stdout.write(settings_reference_markdown())
    else:
        sys.stdout.write(example_settings())
