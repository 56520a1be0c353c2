"""Units for tests/engine/pilots/test_work_queue.py: functions that worker children call ({"call": "workqueue_units:..."}).

Imported by the worker (as a "preload") when ``WQ_PRELOAD_MARKER`` is set, it touches that file and then
takes ``WQ_PRELOAD_SECONDS`` to load, like a heavy workflow script.
"""

from __future__ import annotations

import os
import resource
import signal
import sys
import time
from pathlib import Path

if os.environ.get("WQ_PRELOAD_MARKER"):
    Path(os.environ["WQ_PRELOAD_MARKER"]).touch()
    time.sleep(float(os.environ.get("WQ_PRELOAD_SECONDS", "1.5")))


def segfault() -> int:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file
    print("about to crash", flush=True)
    os.kill(os.getpid(), signal.SIGSEGV)
    return 0  # not reached


def exit_hard(code: int) -> int:
    print("leaving at once", flush=True)
    os._exit(code)


def returns(code: int, text: str = "") -> int:
    print(f"out:{text}")
    print(f"err:{text}", file=sys.stderr)
    return code


def raises(text: str) -> int:
    raise RuntimeError(text)


def exits(value: object) -> int:
    sys.exit(value)


def sleeps(seconds: float, marker: str) -> int:
    """Sleep; whatever stops it, write ``marker`` on the way out (a unit that unwinds its outputs)."""
    try:
        time.sleep(seconds)
    finally:
        Path(marker).write_text("unwound\n")
    return 0
