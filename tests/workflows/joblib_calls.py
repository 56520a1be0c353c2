"""joblib calls through the b2batch backend, every function defined here in ``__main__`` (they travel by value).

``python joblib_calls.py SCENARIO --system NAME [options]`` prints one JSON line ``RESULT {...}`` on stdout:

- ``values``: squares in order, as a list, a generator and an unordered generator, against loky's;
- ``error``: a call raises ValueError: its type, message, notes and remote traceback;
- ``sleep``: one call that writes its pid into ``--out`` and sleeps (the test kills its job);
- ``nested``: each outer call runs an inner Parallel and reports the processes and levels;
- ``htcondor``: joblib-htcondor's way (``register_htcondor``, backend "htcondor", its parameters);
- ``throttle``: calls that note when they ran, under ``throttle=2``, then with ``delete_task_file_on_load``
  (how many task files their folder held meanwhile), then a 50 MB argument and result.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from joblib import Parallel, delayed, parallel_config

import b2batch.joblib


def square(x: int) -> int:
    if x < 0:
        raise ValueError(f"negative: {x}")
    return x * x


def write_pid_and_sleep(folder: str, seconds: float) -> int:
    Path(folder, f"{os.getpid()}.pid").write_text("")
    time.sleep(seconds)
    return os.getpid()


def interval(folder: str, i: int, seconds: float) -> list:
    """When this call ran, and how many task files the call's folder held meanwhile."""
    start = time.time()
    time.sleep(seconds)
    return [start, time.time(), len(list(Path(folder).glob("*/jobs/*/call.pkl")))]


def most_overlapping(intervals: list) -> int:
    events = sorted([(s, 1) for s, _e, *_ in intervals] + [(e, -1) for _s, e, *_ in intervals])
    most = now = 0
    for _t, step in events:
        now += step
        most = max(most, now)
    return most


def big(data: bytes) -> bytes:
    return data[::-1] + b"!"


def where(i: int) -> dict:
    return {"i": i, "pid": os.getpid(), "level": os.environ.get("B2BATCH_JOBLIB_LEVEL")}


def outer(i: int) -> dict:
    inner = Parallel()(delayed(where)(j) for j in range(3))
    return {**where(i), "inner": inner}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario")
    parser.add_argument("--system", default="local")
    parser.add_argument("--out", default="out")
    parser.add_argument("--seconds", type=float, default=600)
    parser.add_argument("--settings", default="{}", help="JSON of more backend parameters")
    args = parser.parse_args()
    config = {"backend": "b2batch", "n_jobs": -1, "batch_system": args.system, **json.loads(args.settings)}
    result: dict = {}
    if args.scenario == "values":
        expected = Parallel(n_jobs=2, backend="loky")(delayed(square)(i) for i in range(12))
        with parallel_config(**config):
            result["list"] = Parallel()(delayed(square)(i) for i in range(12))
            result["generator"] = list(Parallel(return_as="generator")(delayed(square)(i) for i in range(12)))
            result["unordered"] = sorted(Parallel(return_as="generator_unordered")(
                delayed(square)(i) for i in range(12)))
        result["loky"] = expected
    elif args.scenario == "error":
        try:
            with parallel_config(**config):
                Parallel()(delayed(square)(i) for i in (1, 2, -3, 4))
        except ValueError as e:
            result = {"type": type(e).__name__, "message": str(e), "notes": getattr(e, "__notes__", []),
                      "cause": str(e.__cause__)}
    elif args.scenario == "sleep":
        Path(args.out).mkdir(parents=True, exist_ok=True)
        try:
            with parallel_config(**config):
                Parallel()(delayed(write_pid_and_sleep)(args.out, args.seconds) for _ in range(1))
        except Exception as e:
            result = {"type": type(e).__name__, "message": str(e)}
    elif args.scenario == "nested":
        with parallel_config(**config):
            result["outer"] = Parallel()(delayed(outer)(i) for i in range(2))
        result["caller"] = os.getpid()
    elif args.scenario == "throttle":
        shared = str(Path(args.out).resolve())
        # Emulated schedulers start jobs when asked about them: poll often (a fixed interval, per call).
        with parallel_config(**config, throttle=2, pilot_jobs=0, shared_data_dir=shared, poll_interval=0.3):
            result["throttled"] = most_overlapping(Parallel()(delayed(interval)(shared, i, 3.0) for i in range(5)))
        with parallel_config(**config, throttle=1, pilot_jobs=0, delete_task_file_on_load=True,
                             shared_data_dir=shared, poll_interval=0.3):
            # (a job is submitted up to submission_window = 2 s after the one before was loaded: long calls)
            runs = Parallel()(delayed(interval)(shared, i, 6.0) for i in range(3))
        result["on_load"] = {"overlapping": most_overlapping(runs), "files": [files for *_, files in runs]}
        data = os.urandom(50 * 1024 * 1024)
        with parallel_config(**config):
            [back] = Parallel()(delayed(big)(data) for _ in range(1))
        result["big"] = back[:-1] == data[::-1] and back[-1:] == b"!"
    elif args.scenario == "htcondor":
        from b2batch.joblib import register_htcondor

        register_htcondor()
        try:
            with parallel_config(backend="htcondor", n_jobs=-1, request_cpus=1, request_memory="1Gb",
                                 **json.loads(args.settings)):
                result["list"] = Parallel()(delayed(square)(i) for i in range(5))
        except Exception as e:  # a pool or schedd that cannot be found
            result = {"type": type(e).__name__, "message": str(e)}
    print("RESULT " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    assert b2batch.joblib and sys.argv
    sys.exit(main())
