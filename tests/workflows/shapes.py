"""Tasks for the job-shape tests (job_shape auto by default): n leaves that sleep --seconds each, and their sum.
Each leaf notes in runs/<i>.log its pid, its parent's pid and its env's SHAPE_KIND, so that a test sees which
worker ran which leaves.

    python shapes.py --system local --n 200 [--seconds 0] [--kinds 1] [--job-shape auto] [--pilots N]
        [--only-leaves]

--kinds K gives leaf i the env SHAPE_KIND=i%K (a setting that shapes its job: kinds never share a pilot).
"""

import argparse
import os
import time

import b2batch


class Leaf(b2batch.Task):
    i = b2batch.IntParameter()
    seconds = b2batch.FloatParameter(default=0)
    kinds = b2batch.IntParameter(default=1)

    @property
    def env(self):
        return {"SHAPE_KIND": str(self.i % self.kinds)}

    def output(self):
        yield self.add_to_output("leaf.txt")

    def run(self):
        time.sleep(self.seconds)
        with open(os.path.join(os.environ["SHAPE_RUNS"], f"{self.i}.log"), "a") as f:
            f.write(f"{os.getpid()} {os.getppid()} {os.environ.get('SHAPE_KIND')} {time.time()}\n")
        with open(self.get_output_file_name("leaf.txt"), "w") as f:
            f.write(f"{self.i}\n")


class Sum(b2batch.Task):
    n = b2batch.IntParameter()
    seconds = b2batch.FloatParameter(default=0)
    kinds = b2batch.IntParameter(default=1)

    def requires(self):
        for i in range(self.n):
            yield Leaf(i=i, seconds=self.seconds, kinds=self.kinds)

    def output(self):
        yield self.add_to_output("sum.txt")

    def run(self):
        total = 0
        for name in self.get_input_file_names("leaf.txt"):
            with open(name) as f:
                total += int(f.read())
        with open(self.get_output_file_name("sum.txt"), "w") as f:
            f.write(f"{total}\n")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--system", required=True)
    parser.add_argument("--n", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=0.0)
    parser.add_argument("--kinds", type=int, default=1)
    parser.add_argument("--job-shape", default=None)
    parser.add_argument("--pilots", type=int, default=None)
    parser.add_argument("--only-leaves", action="store_true")
    args, _ = parser.parse_known_args()
    os.environ["SHAPE_RUNS"] = os.path.abspath("runs")
    os.makedirs("runs", exist_ok=True)
    b2batch.set_setting("batch_system", args.system)
    if args.job_shape is not None:
        b2batch.set_setting("job_shape", args.job_shape)
    if args.pilots is not None:
        b2batch.set_setting("pilot_jobs", args.pilots)
    root = Sum(n=args.n, seconds=args.seconds, kinds=args.kinds)
    b2batch.process(list(root.requires()) if args.only_leaves else root, batch=True, workers=1000)
