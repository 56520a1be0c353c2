"""Jobs for the scheduler tests: n tasks that succeed, fail, or sleep, on the batch system given.

    python scheduler_jobs.py --system slurm --n 3 --mode ok|fail|sleep --seconds 300
        [--system-settings '{"cpus-per-task": 2}'] [--job-name probe123]
"""

import argparse
import json
import os
import sys
import time

import b2batch


class Work(b2batch.Task):
    i = b2batch.IntParameter()
    mode = b2batch.Parameter(default="ok")
    seconds = b2batch.IntParameter(default=0)

    def output(self):
        yield self.add_to_output("out.txt")

    def run(self):
        if self.mode == "fail":
            print(f"task {self.i} fails on purpose", file=sys.stderr)
            raise RuntimeError(f"deliberate failure of task {self.i}")
        if self.mode == "sleep":
            time.sleep(self.seconds)
        if self.mode == "span":  # record when it ran, to measure how many ran at once
            start = time.time()
            time.sleep(self.seconds)
            with open(f"spans/{self.i}.txt", "w") as f:
                f.write(f"{start} {time.time()}\n")
        with open(self.get_output_file_name("out.txt"), "w") as f:
            f.write(f"{self.i}\n")


class All(b2batch.WrapperTask):
    n = b2batch.IntParameter()
    mode = b2batch.Parameter(default="ok")
    seconds = b2batch.IntParameter(default=0)

    def requires(self):
        for i in range(self.n):
            yield Work(i=i, mode=self.mode, seconds=self.seconds)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--system", required=True)
    parser.add_argument("--n", type=int, default=3)
    parser.add_argument("--mode", default="ok")
    parser.add_argument("--seconds", type=int, default=0)
    parser.add_argument("--system-settings", default="{}")
    parser.add_argument("--job-name", default=None)
    args, _ = parser.parse_known_args()
    b2batch.set_setting("batch_system", args.system)
    b2batch.set_setting(f"{args.system}_settings", json.loads(args.system_settings))
    b2batch.set_setting("poll_interval", 0.5)
    b2batch.set_setting("max_poll_interval", 2)
    if args.job_name:
        b2batch.set_setting("job_name", args.job_name)
    if args.mode == "span":
        os.makedirs("spans", exist_ok=True)
    result = b2batch.process(All(n=args.n, mode=args.mode, seconds=args.seconds), workers=max(args.n, 1),
                             batch=True, exit_on_failure=False)
    sys.exit(0 if result.scheduling_succeeded else 1)
