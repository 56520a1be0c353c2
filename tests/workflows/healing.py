"""Memory and time escalation, bad nodes (docs/policies.md): ``n`` tasks on one batch system, some of which need
more memory (``--hungry``: task numbers that allocate ``--mb`` MB for ``--hold`` seconds) or more time
(``--slow``: task numbers that sleep ``--sleep`` seconds) than their first request; ``--poison`` tasks always fail.

    python healing.py --system slurm --n 2 --hungry 0 --mb 250 --settings '{"mem": "150M"}'
        [--memory-factor 2] [--time-factor 2] [--max-node-failures 3] [--max-resubmissions 2]
        [--max-task-failures 1]
"""

import argparse
import json
import sys
import time

import b2batch


class Work(b2batch.Task):
    i = b2batch.IntParameter()
    mb = b2batch.IntParameter(default=0)
    hold = b2batch.FloatParameter(default=0)
    sleep = b2batch.FloatParameter(default=0)
    poison = b2batch.BoolParameter(default=False, significant=False)  # not in paths or names

    def output(self):
        yield self.add_to_output("out.txt")

    def run(self):
        if self.poison:
            raise ValueError(f"task {self.i} is broken for good")
        if self.mb:
            block = bytearray(self.mb * 1024 * 1024)
            for k in range(0, len(block), 4096):  # touch every page: resident, not just reserved
                block[k] = 1
            time.sleep(self.hold)
        time.sleep(self.sleep)
        with open(self.get_output_file_name("out.txt"), "w") as f:
            f.write(f"{self.i}\n")


class All(b2batch.WrapperTask):
    n = b2batch.IntParameter()
    hungry = b2batch.ListParameter(default=[])
    slow = b2batch.ListParameter(default=[])
    poison = b2batch.ListParameter(default=[])
    mb = b2batch.IntParameter(default=0)
    hold = b2batch.FloatParameter(default=0)
    sleep = b2batch.FloatParameter(default=0)

    def requires(self):
        for i in range(self.n):
            yield Work(i=i, mb=self.mb if i in self.hungry else 0,
                       hold=float(self.hold) if i in self.hungry else 0.0,
                       sleep=float(self.sleep) if i in self.slow else 0.0, poison=i in self.poison)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--system", required=True)
    parser.add_argument("--n", type=int, default=2)
    parser.add_argument("--hungry", default="")
    parser.add_argument("--slow", default="")
    parser.add_argument("--poison", default="")
    parser.add_argument("--mb", type=int, default=0)
    parser.add_argument("--hold", type=float, default=4)
    parser.add_argument("--sleep", type=float, default=0)
    parser.add_argument("--settings", default="{}")
    parser.add_argument("--memory-factor", type=float, default=None)
    parser.add_argument("--time-factor", type=float, default=None)
    parser.add_argument("--max-node-failures", type=int, default=None)
    parser.add_argument("--max-resubmissions", type=int, default=None)
    parser.add_argument("--max-task-failures", type=int, default=None)
    args, _ = parser.parse_known_args()
    b2batch.set_setting("batch_system", args.system)
    b2batch.set_setting(f"{args.system}_settings", json.loads(args.settings))
    b2batch.set_setting("poll_interval", 0.5)
    b2batch.set_setting("max_poll_interval", 2)
    b2batch.set_setting("job_shape", "job_per_task")
    for name, value in (("retry_memory_factor", args.memory_factor), ("retry_time_factor", args.time_factor),
                        ("max_node_failures", args.max_node_failures),
                        ("max_resubmissions", args.max_resubmissions),
                        ("max_task_failures", args.max_task_failures)):
        if value is not None:
            b2batch.set_setting(name, value)
    numbers = lambda text: [int(x) for x in text.split(",") if x.strip()]  # noqa: E731
    result = b2batch.process(All(n=args.n, hungry=numbers(args.hungry), slow=numbers(args.slow),
                                 poison=numbers(args.poison), mb=args.mb,
                                 hold=args.hold, sleep=args.sleep), workers=max(args.n, 1), batch=True,
                             exit_on_failure=False)
    sys.exit(0 if result.scheduling_succeeded else 1)
