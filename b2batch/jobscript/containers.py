"""Jobs in containers: the command line that runs a job's command inside an Apptainer, Singularity, Podman or
Docker image, on any batch system.

The ``container`` setting is a dict::

    {"engine": "apptainer", "image": "/cvmfs/belle.cern.ch/images/belle2-base-el9",
     "mounts": ["/cvmfs"], "options": ["--cleanenv"]}

b2luigi's settings (``apptainer_image``, ``apptainer_mounts``, ``apptainer_mount_defaults``,
``apptainer_additional_params``, ``apptainer_cmd``) describe the same for Apptainer or Singularity; the
``apptainer`` batch system runs each task in that container on this machine.

Inside the container a shell sources ``env_script``, exports ``env`` and executes the command; the working
directory, the result, log and job folders, the workflow's folder, the settings files and b2batch itself are
mounted at their own paths. Building the command line checks every value and names the task, the setting,
the value and the fix; the wrapper quotes every word (:func:`b2batch.jobscript.templating.quote`).
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from b2batch.jobscript import base_folder
from b2batch.jobscript.container_choice import system_name, wanted  # noqa: F401  (wanted: as containers.wanted)
from b2batch.jobscript.container_command import ContainerCommand, apptainer_engine
from b2batch.errors import SettingError

ENGINES = ("apptainer", "singularity", "podman", "docker")
KEYS = {"engine": "apptainer, singularity, podman or docker", "image": "the image (a path, or a name or URI the "
        "engine pulls)", "mounts": "host paths to mount, \"host[:container[:options]]\"", "mount_defaults":
        "true: also mount the folders the job needs (default)", "options": "more arguments of the engine's "
        "run/exec command", "executable": "the engine's command on the node (default: the engine's name)"}
#: Variables of the batch systems that a job reads (its id, its end time): passed into podman and docker
#: containers, which start with an empty environment (Apptainer passes the whole environment).
BATCH_VARIABLES = ("SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "SLURM_JOB_END_TIME",
                   "SLURM_CPUS_PER_TASK", "JOB_ID", "SGE_TASK_ID", "NSLOTS", "LSB_JOBID", "LSB_JOBINDEX",
                   "CONDOR_JOB_ID", "_CONDOR_JOB_AD", "_CONDOR_SCRATCH_DIR", "B2BATCH_LOCAL_JOB_ID")
#: What the shell in the container runs: ``sh -c SCRIPT b2batch <env_script or ""> <setup_failed file>
#: NAME=value... -- command...``: it sources env_script (without arguments), exports the variables of ``env``
#: (after env_script, as outside containers) and executes the command. Values arrive as arguments, never as
#: code.
INNER_SCRIPT = ('b2batch_source() { b2batch_file=$1; shift; . "$b2batch_file"; }; '
                'if [ -n "$1" ]; then b2batch_source "$1" || { '
                'echo "b2batch: sourcing env_script $1 failed in the container" >&2; '
                'echo "sourcing env_script $1 failed in the container" > "$2"; exit 3; }; fi; '
                'shift 2; while [ "$1" != -- ]; do export "$1"; shift; done; shift; exec "$@"')


@dataclass
class Container:
    """A container a job runs in, with every value checked."""

    engine: str
    image: str
    executable: str
    #: Where the container was asked for (a setting name), for messages.
    setting: str
    mounts: list[str] = field(default_factory=list)
    options: list[str] = field(default_factory=list)
    workdir: str = ""
    env_names: list[str] = field(default_factory=list)

    @property
    def image_is_path(self) -> bool:
        """Whether the image is a file or folder on the node (checked there before the job starts)."""
        return self.engine in ("apptainer", "singularity") and "://" not in self.image

    def argv(self) -> list[str]:
        """The engine's command line up to and including the image (spelt by :mod:`.container_command`)."""
        return ContainerCommand(engine=self.engine, image=self.image, executable=self.executable, binds=self.mounts,
                                workdir=self.workdir, env_names=self.env_names, options=self.options,
                                host_network=True, bare_bind_same_path=True).argv()

    def wrap(self, command: list[str], shell: str, env_script: Path | None, env: list[tuple[str, str]],
             setup_failed_file: Path) -> list[str]:
        """``command`` run in the container, after env_script and env."""
        return [*self.argv(), shell, "-c", INNER_SCRIPT, "b2batch", str(env_script or ""), str(setup_failed_file),
                *(f"{name}={value}" for name, value in env), "--", *command]


def _fail(owner: Any, setting: str, value: Any, problem: str, fix: str) -> SettingError:
    return SettingError(f"Task {owner}: the setting {setting!r} is {value!r}: {problem}. {fix}")


def _strings(owner: Any, setting: str, value: Any, what: str, split: bool = False, shown: Any = None) -> list[str]:
    """A list of strings (a string is one item, or shell words with ``split``); ``shown``: the setting's whole
    value, for the message, when ``value`` is a part of it."""
    whole, part = (value, "it") if shown is None else (shown, f"its \"{what}\" ({value!r})")
    if value is None:
        return []
    if isinstance(value, str):
        try:
            return shlex.split(value) if split else [value]
        except ValueError as e:
            raise _fail(owner, setting, whole, f"{part} are not valid shell words ({e})",
                        "Fix the quotes, or give a list of strings.") from None
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) and v for v in value):
        return list(value)
    raise _fail(owner, setting, whole, f"{part} must be a list of non-empty strings",
                f"Example: {_example(what)}.")


def _example(what: str) -> str:
    return '["/cvmfs", "/data:/data:ro"]' if what == "mounts" else '["--cleanenv"]'


@functools.cache
def _apptainer_on_path() -> str:
    """b2luigi's choice when ``apptainer_cmd`` is not set: apptainer, else singularity, on PATH here; else
    apptainer (the job's wrapper says so when it is not on the node either)."""
    return next((name for name in ("apptainer", "singularity") if shutil.which(name)), "apptainer")


def _from_settings(owner: Any, config: Any) -> tuple[dict[str, Any], str] | None:
    """The raw container description and the setting it came from, or None."""
    value = config["container"]
    if value:
        if not isinstance(value, dict):
            raise _fail(owner, "container", value, "it must be a dict (a JSON object)",
                        'Example: {"engine": "apptainer", "image": "/path/image.sif", "mounts": ["/cvmfs"]}.')
        unknown = sorted(set(value) - set(KEYS))
        if unknown:
            known = "; ".join(f"{k}: {v}" for k, v in KEYS.items())
            raise _fail(owner, "container", value, f"it has the unknown key(s) {', '.join(map(repr, unknown))}",
                        f"Known keys: {known}.")
        return dict(value), "container"
    is_system = system_name(config["batch_system"]) == "apptainer"
    image = config["apptainer_image"]
    if not image and not is_system:
        return None
    if not image:
        raise SettingError(f"Task {owner}: the batch_system 'apptainer' runs each task in an Apptainer container, "
                           f"but the setting 'apptainer_image' is not set. Set it to the image (a .sif file, a "
                           f"sandbox folder or a docker:// URI), e.g. \"/cvmfs/belle.cern.ch/images/belle2-base-el9\".")
    engine = config["apptainer_cmd"] or _apptainer_on_path()
    return {"engine": apptainer_engine(engine), "executable": engine,
            "image": image, "mounts": _strings(owner, "apptainer_mounts", config["apptainer_mounts"], "mounts"),
            "mount_defaults": config["apptainer_mount_defaults"],
            "options": _strings(owner, "apptainer_additional_params", config["apptainer_additional_params"],
                                "options", split=True)}, "apptainer_image"


def _host_path(mount: str) -> str:
    return mount.split(":", 1)[0]


def _default_mounts(config: Any, job_files: Any, working_dir: Path, env_script: Path | None) -> list[Path]:
    """The folders and files a job needs, at their own paths: made where they are folders of b2batch's."""
    from b2batch.jobscript.templating import PACKAGE_FOLDER

    folders = []
    for name in ("result_dir", "log_dir", "task_file_dir", "scratch_dir"):
        value = config[name]
        if value and "://" not in str(value):  # remote result_dirs are reached over the network
            folder = base_folder.resolve(value)
            folder.mkdir(parents=True, exist_ok=True)
            folders.append(folder)
    for folder in (job_files.folder, job_files.log_folder):
        folder.mkdir(parents=True, exist_ok=True)
    found = [working_dir, base_folder.base_dir(), *folders, job_files.folder, job_files.log_folder,
             PACKAGE_FOLDER, *config["settings_files"]]
    if env_script is not None:
        found.append(env_script)
    return [Path(p) for p in found]


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _without_nested(given: list[str], defaults: list[Path]) -> list[str]:
    """The mounts ``given``, then the ``defaults`` (in their order) that no other mount contains."""
    given_hosts = [os.path.normpath(_host_path(m)) for m in given
                   if len(m.split(":")) == 1 or m.split(":")[1] == _host_path(m)]
    candidates = list(dict.fromkeys(os.path.normpath(str(p)) for p in defaults))
    return [*given, *(p for p in candidates if not any(_inside(p, h) for h in given_hosts)
                      and not any(c != p and _inside(p, c) for c in candidates))]


def container_of(owner: Any, config: Any, job_files: Any, working_dir: Path,
                 env_script: Path | None) -> Container | None:
    """The container the job of ``owner`` (with the settings ``config``, its JobConfig) runs in, or None; a bad setting
    raises :class:`SettingError` naming the task, the setting, the value and the fix."""
    found = _from_settings(owner, config)
    if found is None:
        return None
    spec, setting = found
    engine = spec.get("engine")
    if engine not in ENGINES:
        problem = "it names no engine" if engine is None else f"its engine {engine!r} is not one b2batch knows"
        raise _fail(owner, setting, spec, problem, f"Set \"engine\" to one of {', '.join(ENGINES)}.")
    if system_name(config["batch_system"]) == "apptainer" and engine not in ("apptainer", "singularity"):
        raise _fail(owner, setting, spec, f"the batch_system 'apptainer' cannot run {engine} containers",
                    "Use the engine apptainer or singularity, or the batch_system local.")
    image = spec.get("image")
    if not isinstance(image, str) or not image.strip():
        raise _fail(owner, setting, spec, "it names no image" if not image else "its image must be a string",
                    "Set \"image\" to the image: a path (.sif file or sandbox folder) for apptainer and singularity, "
                    "an image name (e.g. \"localhost/analysis:1.0\") for podman and docker.")
    executable = spec.get("executable") or engine
    if not isinstance(executable, str):
        raise _fail(owner, setting, spec, "its executable must be a string", f"Example: \"/usr/bin/{engine}\".")
    mount_defaults = spec.get("mount_defaults")
    if mount_defaults is None:
        mount_defaults = True
    if not isinstance(mount_defaults, bool):
        raise _fail(owner, setting, spec, "its mount_defaults must be true or false", "Use true (the default) or "
                    "false (mount only what \"mounts\" lists).")
    mounts = [str(base_folder.resolve(_host_path(m))) + m[len(_host_path(m)):] if not os.path.isabs(_host_path(m))
              else m for m in _strings(owner, setting, spec.get("mounts"), "mounts", shown=spec)]
    if mount_defaults:
        mounts = _without_nested(mounts, _default_mounts(config, job_files, working_dir, env_script))
    return Container(engine=engine, image=image.strip(), executable=executable, setting=setting, mounts=mounts,
                     options=_strings(owner, setting, spec.get("options"), "options", split=True, shown=spec),
                     workdir=str(working_dir), env_names=list(BATCH_VARIABLES) if engine in ("podman", "docker") else [])
