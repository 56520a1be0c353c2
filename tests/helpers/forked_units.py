"""Units that local jobs run in tests/systems/test_local_forks.py: each says what its process sees."""

from __future__ import annotations

import gc
import json
import os
import sys
import time


def report(path: str) -> int:
    """Write what this job's process sees (working dir, environment, argv, session) to ``path``."""
    print("a line of the unit on stdout")
    print("a line of the unit on stderr", file=sys.stderr)
    with open(path, "w") as f:
        json.dump({"cwd": os.getcwd(), "env": dict(os.environ), "argv": sys.argv, "pid": os.getpid(),
                   "session": os.getsid(0), "stdin": os.read(0, 10).decode(), "gc": gc.get_threshold()}, f)
    return 0


def sleep(seconds: float) -> int:
    time.sleep(seconds)
    return 0


def fail(code: int) -> int:
    return code
