"""Emulated HTCondor and LSF command-line tools that really run jobs on this machine.

Rehearse a workflow offline: put a directory of shims named like the real tools (``condor_submit``,
``condor_q``, ``condor_history``, ``condor_rm`` / ``bsub``, ``bjobs``, ``bkill``) first on ``PATH``,
and a backend talks to the emulator without knowing it. See ``docs/emulators.md``.

Public API: :func:`make_bin_dir`, :func:`run_with_emulator`, :data:`TOOLS`.
"""

from __future__ import annotations

import logging
import os
import shlex
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

logger = logging.getLogger(__name__)

__all__ = ["TOOLS", "make_bin_dir", "run_with_emulator"]

#: The tools each emulated system provides, by system name.
TOOLS: dict[str, tuple[str, ...]] = {
    "htcondor": ("condor_submit", "condor_q", "condor_history", "condor_rm"),
    "lsf": ("bsub", "bjobs", "bkill"),
}


def make_bin_dir(system: str, directory: Path) -> Path:
    """Write executable shims named like ``system``'s real tools into ``directory``; returns it.

    Each shim runs ``sys.executable .../b2batch/emulators/_entry.py <tool> "$@"``, the equivalent of
    ``sys.executable -m b2batch.emulators <tool> "$@"`` that skips importing luigi (see ``_entry.py``).
    The state directory is whatever ``B2BATCH_EMULATOR_DIR`` says when a shim runs.
    """
    if system not in TOOLS:
        raise ValueError(f"unknown batch system {system!r}; emulated: {', '.join(TOOLS)}")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    python = shlex.quote(sys.executable)
    entry = shlex.quote(str(Path(__file__).resolve().with_name("_entry.py")))
    for tool in TOOLS[system]:
        shim = directory / tool
        shim.write_text(
            "#!/bin/sh\n"
            f"# b2batch emulator shim for {tool} ({system}); not the real tool.\n"
            f'exec {python} {entry} {tool} "$@"\n'
        )
        shim.chmod(0o755)
    logger.debug("Wrote %s emulator shims to %s", system, directory)
    return directory


def run_with_emulator(system: str, cmd: list[str]) -> int:
    """Run ``cmd`` with ``system``'s emulated tools first on ``PATH``; returns its exit status."""
    if not cmd:
        raise ValueError("no command to run")
    with tempfile.TemporaryDirectory(prefix=f"b2batch-{system}-bin-") as tmp:
        bin_dir = make_bin_dir(system, Path(tmp))
        env = dict(os.environ)
        env["PATH"] = str(bin_dir) + os.pathsep + env.get("PATH", "")
        logger.info("Running %s with the %s emulator (tools in %s)", shlex.join(cmd), system, bin_dir)
        return _run_to_its_end(cmd, env)


def _status(code: int) -> int:
    """An exit status for a child's return code (killed by signal N: 128 + N, as a shell says)."""
    return 128 - code if code < 0 else code


def _in_terminal_foreground() -> bool:
    """Whether this process is in the foreground process group of its terminal (where Ctrl-C reaches every
    process of the group, the command included)."""
    try:
        return os.tcgetpgrp(sys.stdin.fileno()) == os.getpgrp()
    except (OSError, ValueError, AttributeError):
        return False


def _run_to_its_end(cmd: list[str], env: dict[str, str]) -> int:
    """Run ``cmd`` and wait for it, however it is stopped: a Ctrl-C in the terminal reaches it (it is in the
    terminal's process group) once; SIGTERM, SIGHUP and a SIGINT not from the terminal (``kill -INT``) sent to
    this process are passed on to it; either way this process waits while the command cleans up (cancels its
    jobs, writes its summary)."""
    try:
        child = subprocess.Popen(cmd, env=env)
    except OSError as e:  # as a shell says it, with its exit status: 127 not found, 126 found but not runnable
        found = not isinstance(e, FileNotFoundError)
        reason = e.strerror or type(e).__name__
        if not found and os.sep not in cmd[0]:
            reason = "command not found"  # looked up on PATH
        sys.stderr.write(f"b2batch emulate: {cmd[0]}: {reason}\n")
        return 126 if found else 127

    def pass_on(signum: int, frame: object) -> None:
        if signum == signal.SIGINT and _in_terminal_foreground():
            return  # Ctrl-C in the terminal reached the command too: once is enough
        if child.poll() is None:
            child.send_signal(signum)

    handlers = {signal.SIGINT: pass_on, signal.SIGTERM: pass_on, signal.SIGHUP: pass_on}
    try:
        previous = {sig: signal.signal(sig, handler) for sig, handler in handlers.items()}
    except ValueError:  # not the main thread: nothing to catch
        return _status(child.wait())
    try:
        return _status(child.wait())
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
