"""Tasks for the pilot and bundle tests: n leaves and their sum, each leaf noting every start and end of
its runs (pid, time) in runs/<i>.log, so that a test sees how often and when each ran.

    python pilots.py --system local --n 10 (--pilots 2 | --per-job 4) [--slow 0 --seconds 30] [--segv 3]
        [--sum-alone SECONDS: the sum in a job of its own, sleeping that long] [--only-leaves]
"""

import argparse
import os
import time

import b2batch


def note(i, what):
    with open(os.path.join(os.environ["PILOT_RUNS"], f"{i}.log"), "a") as f:
        f.write(f"{what} {os.getpid()} {os.getppid()} {time.time()}\n")


class Leaf(b2batch.Task):
    i = b2batch.IntParameter()
    slow = b2batch.IntParameter(default=-1)
    seconds = b2batch.FloatParameter(default=0)
    segv = b2batch.IntParameter(default=-1)

    def output(self):
        yield self.add_to_output("leaf.txt")

    def run(self):
        note(self.i, "start")
        if self.i == self.segv:
            os.kill(os.getpid(), 11)
        if self.i == self.slow or self.slow == -2:
            time.sleep(self.seconds)
        with open(self.get_output_file_name("leaf.txt"), "w") as f:
            f.write(f"{self.i}\n")
        note(self.i, "end")


class Sum(b2batch.Task):
    n = b2batch.IntParameter()
    slow = b2batch.IntParameter(default=-1)
    seconds = b2batch.FloatParameter(default=0)
    segv = b2batch.IntParameter(default=-1)

    def requires(self):
        for i in range(self.n):
            yield Leaf(i=i, slow=self.slow, seconds=self.seconds, segv=self.segv)

    def output(self):
        yield self.add_to_output("sum.txt")

    def run(self):
        with open(os.path.join(os.environ["PILOT_RUNS"], os.pardir, "sum-started"), "a") as f:
            f.write(f"{os.getpid()} {time.time()}\n")
        time.sleep(float(os.environ.get("PILOT_SUM_SECONDS", "0")))
        total = sum(int(open(f).read()) for f in self.get_input_file_names("leaf.txt"))
        with open(self.get_output_file_name("sum.txt"), "w") as f:
            f.write(f"{total}\n")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--system", required=True)
    parser.add_argument("--n", type=int, default=10)
    parser.add_argument("--pilots", type=int, default=0)
    parser.add_argument("--per-job", type=int, default=1)
    parser.add_argument("--slow", type=int, default=-1)
    parser.add_argument("--seconds", type=float, default=0.0)
    parser.add_argument("--segv", type=int, default=-1)
    parser.add_argument("--sum-alone", type=float, default=None)
    parser.add_argument("--only-leaves", action="store_true")
    args, _ = parser.parse_known_args()
    os.environ["PILOT_RUNS"] = os.path.abspath("runs")
    os.makedirs("runs", exist_ok=True)
    b2batch.set_setting("batch_system", args.system)
    b2batch.set_setting("pilot_jobs", args.pilots)
    b2batch.set_setting("tasks_per_job", args.per_job)
    if args.sum_alone is not None:
        os.environ["PILOT_SUM_SECONDS"] = str(args.sum_alone)
        Sum.pilot_jobs = 0  # a job of its own: the leaves' pilots have nothing more to do while it runs
    root = Sum(n=args.n, slow=args.slow, seconds=args.seconds, segv=args.segv)
    b2batch.process(list(root.requires()) if args.only_leaves else root, batch=True, workers=100)
