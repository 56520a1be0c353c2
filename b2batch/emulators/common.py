"""Small helpers shared by the emulated commands: who and where we are, and injected submit failures."""

from __future__ import annotations

import getpass
import socket
import sys
from typing import Any

from b2batch.emulators.job_table import JobTable


def current_user() -> str:
    """The submitting user's name, as the scheduler would record it."""
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no passwd entry in some containers
        return "nobody"


def hostname() -> str:
    """This machine's short host name (the emulated submit and execute host)."""
    return socket.gethostname().split(".")[0] or "localhost"


def take_submit_failure(table: JobTable) -> bool:
    """Consume one injected submit failure; True if this submission must fail."""
    remaining = int(table.inject.get("fail_submits", 0))
    if remaining <= 0:
        return False
    table.set_inject("fail_submits", remaining - 1 if remaining > 1 else None)
    return True


def submit_delay(table: JobTable) -> float:
    """Seconds a submit command waits after the scheduler took the jobs, before it prints their ids (injected:
    the window in which a killed submitter has jobs it never heard of)."""
    return float(table.inject.get("submit_delay") or 0.0)


def take_next_fate(table: JobTable) -> dict[str, Any] | None:
    """Consume one injected fate for the next submitted job (``hold`` or ``exit``), if any."""
    fates: list[dict[str, Any]] = list(table.inject.get("next", []))
    if not fates:
        return None
    fate = fates.pop(0)
    table.set_inject("next", fates or None)
    return fate


def err(text: str) -> None:
    """Print a message to stderr the way the tools do (one line, newline-terminated)."""
    sys.stderr.write(text if text.endswith("\n") else text + "\n")


def out(text: str) -> None:
    """Print to stdout, newline-terminated."""
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
