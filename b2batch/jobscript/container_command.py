"""The one place that spells a container engine's command line (issue 41, must-have 4).

"Run this command in image X with engine E, these binds, this environment and these options" becomes an argv
here and nowhere else: the job wrapper's containers (:mod:`b2batch.jobscript.containers`), the farm's container
runners (:mod:`b2batch.farm.runners`) and b2luigi's ``create_apptainer_command`` (the b2luigi shim) describe
what they want as a :class:`ContainerCommand` and take its :meth:`~ContainerCommand.argv`.
``tests/package/test_one_container_command.py`` fails when another module spells an engine's command line.

The engines and their spelling:

- ``apptainer``, ``singularity``: ``<exe> exec --bind=<bind>... --pwd=<workdir> <options> <image> <command>``;
  they pass the whole environment into the container, so ``env_names`` is not written;
- ``podman``, ``docker``: ``<exe> run --rm --init [--network=host] [--user=<uid>:<gid>] --env=<name>...
  --volume=<bind>... --workdir=<workdir> <options> <image> <command>`` (``--user`` for docker only, whose
  daemon would otherwise write the job's files as root);
- ``shifter``: ``<exe> --image=<image> --workdir=<workdir> --volume=<bind>... --module=<module>... <options> --
  <command>``.

A bind is ``host[:container[:options]]``. Two spellings that users of other tools rely on are kept as options
of the description, not as command lines of their own: PyTaskFarmer's podman volumes are passed as written
(``bare_bind_same_path=False``), and b2luigi's ``create_apptainer_command`` puts the options first and each
bind as two words (``b2luigi_spelling=True``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["ENGINES", "ContainerCommand", "apptainer_engine"]

#: The container engines b2batch knows how to call.
ENGINES = ("apptainer", "singularity", "podman", "docker", "shifter")
_APPTAINERS = ("apptainer", "singularity")
_RUNTIMES = ("podman", "docker")


def apptainer_engine(executable: str) -> str:
    """The engine (``apptainer`` or ``singularity``) of an Apptainer-like command such as ``apptainer_cmd``'s
    ``/opt/singularity/bin/singularity``; ``apptainer`` when its name is neither."""
    name = os.path.basename(executable)
    return name if name in _APPTAINERS else "apptainer"


@dataclass(frozen=True)
class ContainerCommand:
    """What to run a command in: the engine, the image and how; :meth:`argv` spells it for the engine."""

    engine: str
    image: str
    #: The engine's command (a name on PATH or a path); the engine's name when empty.
    executable: str = ""
    #: Host paths to make visible, ``host[:container[:options]]``.
    binds: Sequence[str] = ()
    #: The command's working directory in the container; the engine's default when empty.
    workdir: str = ""
    #: Also bind ``workdir`` at its own path (apptainer, singularity, podman, docker).
    bind_workdir: bool = False
    #: Variables of the caller's environment passed into the container (podman and docker; apptainer and
    #: singularity pass all of them).
    env_names: Sequence[str] = ()
    #: More arguments of the engine's command, after b2batch's own.
    options: Sequence[str] = ()
    #: Shifter's modules.
    modules: Sequence[str] = ()
    #: podman and docker: the host's network (a job talks to the steering process and remote storage).
    host_network: bool = False
    #: podman and docker: a bind that names only a host path is mounted at that path.
    bare_bind_same_path: bool = False
    #: apptainer and singularity: b2luigi's spelling (options first, ``--bind PATH`` as two words).
    b2luigi_spelling: bool = False

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise ValueError(f"Unknown container engine {self.engine!r}. Known: {', '.join(ENGINES)}.")

    def argv(self, command: Sequence[str] = ()) -> list[str]:
        """The engine's command line that runs ``command`` (an argv) in the image; without ``command``, the
        command line up to and including the image (shifter's up to its ``--``)."""
        executable = self.executable or self.engine
        if self.engine in _APPTAINERS:
            return [executable, *self._apptainer_arguments(), self.image, *command]
        if self.engine in _RUNTIMES:
            return [executable, *self._runtime_arguments(), self.image, *command]
        return [executable, *self._shifter_arguments(), "--", *command]

    def _apptainer_arguments(self) -> list[str]:
        binds = [*self.binds, *([self.workdir] if self.bind_workdir and self.workdir else [])]
        workdir = [f"--pwd={self.workdir}"] if self.workdir else []
        if self.b2luigi_spelling:
            return ["exec", *self.options, *(word for bind in binds for word in ("--bind", bind)), *workdir]
        return ["exec", *(f"--bind={bind}" for bind in binds), *workdir, *self.options]

    def _runtime_arguments(self) -> list[str]:
        argv = ["run", "--rm", "--init"]
        if self.host_network:
            argv.append("--network=host")
        if self.engine == "docker":
            argv.append(f"--user={os.getuid()}:{os.getgid()}")
        argv += [f"--env={name}" for name in self.env_names]
        binds = [f"{bind}:{bind}" if self.bare_bind_same_path and ":" not in bind else bind for bind in self.binds]
        if self.bind_workdir and self.workdir:
            binds.append(f"{self.workdir}:{self.workdir}")
        argv += [f"--volume={bind}" for bind in binds]
        if self.workdir:
            argv.append(f"--workdir={self.workdir}")
        return [*argv, *self.options]

    def _shifter_arguments(self) -> list[str]:
        argv = [f"--image={self.image}"]
        if self.workdir:
            argv.append(f"--workdir={self.workdir}")
        argv += [f"--volume={bind}" for bind in self.binds]
        argv += [f"--module={module}" for module in self.modules]
        return [*argv, *self.options]
