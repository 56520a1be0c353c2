"""Tasks for the fault-injection tests (tests/e2e/test_faults.py): each task records every run of itself.

    python faults_jobs.py [--n 3]          # settings (batch_system, job_name, ...) from settings.json

Step(i) appends a line "start pid=... host=... time=..." to runs/Step_<i>.txt (outside result_dir) when its
run() begins and a "done ..." line just before it returns. It writes out.txt through on_temporary_files: the
first line, then, while the file gates/<i> exists, it waits (so a test can hold the task mid-run and kill its
job, the node's daemon or the steering process), then the second line. A complete out.txt therefore holds
both lines of content(i); a killed run leaves no out.txt behind, unless the file "direct" exists: then out.txt
is written directly, as a task without on_temporary_files does, and a killed run leaves half of it. task_settings.json, if there, gives tasks
their own slurm_settings: {"1": {"no-requeue": true}}.
"""

import argparse
import json
import os
import socket
import time
from pathlib import Path

import b2batch

HERE = Path(__file__).resolve().parent
RUNS = HERE / "runs"
GATES = HERE / "gates"
TASK_SETTINGS = HERE / "task_settings.json"
DIRECT = HERE / "direct"


def content(i: int) -> str:
    return f"Step {i}\nsquare {i * i}\n"


def record(i: int, what: str) -> None:
    RUNS.mkdir(exist_ok=True)
    with open(RUNS / f"Step_{i}.txt", "a") as f:
        f.write(f"{what} pid={os.getpid()} host={socket.gethostname()} time={time.time():.3f}\n")


class Step(b2batch.Task):
    i = b2batch.IntParameter()

    def output(self):
        yield self.add_to_output("out.txt")

    @property
    def slurm_settings(self):
        own = json.loads(TASK_SETTINGS.read_text()) if TASK_SETTINGS.exists() else {}
        if str(self.i) not in own:
            raise AttributeError("slurm_settings")  # not set for this task: settings.json decides
        return own[str(self.i)]

    def run(self):
        if DIRECT.exists():
            self.write(self.get_output_file_name("out.txt"))
        else:
            self.write_through_a_temporary_file()

    @b2batch.on_temporary_files
    def write_through_a_temporary_file(self):
        self.write(self.get_output_file_name("out.txt"))

    def write(self, path):
        record(self.i, "start")
        first, second = content(self.i).splitlines(keepends=True)
        with open(path, "w") as f:
            f.write(first)
            f.flush()
            gate = GATES / str(self.i)
            deadline = time.monotonic() + 600
            while gate.exists() and time.monotonic() < deadline:
                time.sleep(0.2)
            f.write(second)
        record(self.i, "done")


class All(b2batch.WrapperTask):
    n = b2batch.IntParameter()

    def requires(self):
        for i in range(self.n):
            yield Step(i=i)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=3)
    parser.add_argument("--in-process", action="store_true", help="run without --batch, in luigi's worker")
    args, _ = parser.parse_known_args()
    print(f"steering pid {os.getpid()}", flush=True)
    b2batch.process(All(n=args.n), workers=max(args.n, 1), batch=not args.in_process)
