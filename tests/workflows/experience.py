"""Parts -> Total for the tests of the run experience: progress, summary, timeline, report, exit status and
the b2batch command. Flags choose how many parts there are, how long they take and which one fails.

    python experience.py [--count N] [--sleep S] [--fail I] [--resubmit N] [--no-exit] [--batch ...]
"""

import argparse
import sys
import time

import b2batch

parser = argparse.ArgumentParser()
parser.add_argument("--count", type=int, default=2)
parser.add_argument("--sleep", type=float, default=0.0)
parser.add_argument("--fail", type=int, default=-1, help="the part that fails")
parser.add_argument("--resubmit", type=int, default=0, help="resubmit failed tasks this often")
parser.add_argument("--no-exit", action="store_true", help="process(..., exit_on_failure=False)")
args, _unknown = parser.parse_known_args()


class Part(b2batch.Task):
    n = b2batch.IntParameter()

    def output(self):
        yield self.add_to_output("part.txt")

    def run(self):
        time.sleep(args.sleep)
        if self.n == args.fail:
            print(f"part {self.n} goes wrong", file=sys.stderr)
            raise RuntimeError(f"part {self.n} is broken")
        with open(self.get_output_file_name("part.txt"), "w") as f:
            f.write(f"{self.n}\n")


class Total(b2batch.Task):
    def requires(self):
        return [Part(n=i) for i in range(args.count)]

    def output(self):
        yield self.add_to_output("total.txt")

    def run(self):
        with open(self.get_output_file_name("total.txt"), "w") as f:
            f.write(f"{len(self.get_input_file_names('part.txt'))}\n")


if __name__ == "__main__":
    if args.resubmit:
        b2batch.set_setting("resubmit_failed_tasks", True)
        b2batch.set_setting("max_resubmissions", args.resubmit)
    result = b2batch.process(Total(), workers=max(args.count, 1), exit_on_failure=not args.no_exit)
    print(f"after process: {result.status.name}")
