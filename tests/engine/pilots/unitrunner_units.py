"""Units for tests/engine/pilots/test_unit_processes.py: calls that tell which process ran them and what they found of it."""

from __future__ import annotations

import json
import os
import sys
import threading
import time


def report(path: str, tag: str) -> int:
    """Append what this unit found of its process to ``path`` (one JSON line) and print ``tag``."""
    print(f"out:{tag}")
    print(f"err:{tag}", file=sys.stderr)
    with open(path, "a") as f:
        f.write(json.dumps({"tag": tag, "pid": os.getpid(), "cwd": os.getcwd(),
                            "variable": os.environ.get("B2BATCH_TEST_LEAK"), "argv": sys.argv,
                            "leaked_path": "/leaked/by/a/unit" in sys.path, "umask": _umask()}) + "\n")
    return 0


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def change_process(path: str, folder: str) -> int:
    """Change what a next unit of the same process could see: a variable, the working directory, sys.path,
    sys.argv, the umask, sys.stdout."""
    report(path, "changer")
    os.environ["B2BATCH_TEST_LEAK"] = "leaked"
    os.chdir(folder)
    sys.path.append("/leaked/by/a/unit")
    sys.argv.append("--leaked")
    os.umask(0o077)
    sys.stdout = open(os.devnull, "w")
    return 0


def leave_thread(path: str) -> int:
    """Start a thread that outlives the unit."""
    report(path, "threads")
    threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
    return 0


def close_stdout(path: str) -> int:
    """Close the process's stdout (a next unit in the same process could not print)."""
    report(path, "closer")
    sys.stdout.close()
    return 0


def hands(path: str, tag: str) -> int:
    """Hand ``{"tag": tag}`` to the worker as this unit's result; note in ``path`` whether that was possible."""
    from b2batch.engine.pilots import unit_processes

    handed = unit_processes.hand_result({"tag": tag})
    with open(path, "a") as f:
        f.write(json.dumps({"tag": tag, "handed": handed}) + "\n")
    return 0
