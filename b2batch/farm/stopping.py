"""How a farm stops: the signals that stop a farmer (and the steering process of its pilots), the exit
status each stop ends with, and why a line could not be started.

As PyTaskFarmer: SIGUSR1, SIGINT and ``--timeout`` (SIGALRM) end the farm with status 1; SIGTERM and SIGHUP,
which PyTaskFarmer does not handle, end it killed by the signal, after the running lines were put back.
"""

from __future__ import annotations

import errno
import signal

#: The signals that stop a farmer (SIGALRM: ``--timeout``).
STOP_SIGNALS = frozenset({signal.SIGUSR1, signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGALRM})
#: Signals that kill a line when they are sent to a whole process group or job, the farmer included.
STOPPED_LINE = frozenset({signal.SIGTERM, signal.SIGINT, signal.SIGHUP})
#: Seconds a line killed by one of those is held, in case the farmer's own stop signal follows (Slurm's scancel
#: was seen to reach the farmer more than 0.5 s after its lines).
STOP_SIGNAL_WITHIN = 3.0
#: Stops after which the farmer ends as killed by the signal, as PyTaskFarmer does (it has no handler for them).
DIE_BY = frozenset({signal.SIGTERM, signal.SIGHUP})


def exit_code_of(stop: int | None) -> int:
    """0 for a normal end; 1 when stopped by SIGUSR1, SIGINT or the timeout (PyTaskFarmer's handler exits 1);
    128 + the signal for SIGTERM and SIGHUP, which end PyTaskFarmer by the signal itself."""
    if stop is None:
        return 0
    return 128 + stop if stop in DIE_BY else 1


def cannot_start_reason(error: Exception) -> str:
    """Why a line could not be started, in words."""
    text = str(error)
    if isinstance(error, ValueError) and "null byte" in text:
        return "it contains a NUL byte, which no command line can hold"
    if isinstance(error, OSError) and error.errno == errno.E2BIG:
        return "it is too long for a command line on this system (E2BIG: Argument list too long)"
    if isinstance(error, FileNotFoundError):
        return f"command not found ({error.strerror}: {error.filename})"
    if isinstance(error, PermissionError):
        return f"not executable ({error.strerror}: {error.filename})"
    if isinstance(error, UnicodeError):
        return f"it cannot be encoded for the operating system ({error})"
    return f"{type(error).__name__}: {text}"
