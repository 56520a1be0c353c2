"""Parts -> Total, with flags of its own (argparse, parse_known_args) next to b2batch's flags.

Each task records its process id, its arguments and when it started and ended in its output (JSON).
"""

import argparse
import json
import os
import sys
import time

import b2batch

parser = argparse.ArgumentParser()
parser.add_argument("--my-flag", default="none", help="becomes the parameter 'tag' of every task")
parser.add_argument("--show", action="store_true", help="a flag of the script that starts like --show-output")
parser.add_argument("--sleep", type=float, default=0.0, help="seconds each part sleeps")
parser.add_argument("--count", type=int, default=3, help="number of parts")
args, _unknown = parser.parse_known_args()


def record(path, **extra):
    with open(path, "w") as f:
        json.dump({"pid": os.getpid(), "argv": sys.argv[1:], "cwd": os.getcwd(), **extra}, f)


class Part(b2batch.Task):
    tag = b2batch.Parameter()
    n = b2batch.IntParameter()

    def output(self):
        yield self.add_to_output("part.json")

    def run(self):
        print(f"part {self.n} says hello")
        start = time.time()
        time.sleep(args.sleep)
        record(self.get_output_file_name("part.json"), start=start, end=time.time(), show=args.show)


class Total(b2batch.Task):
    tag = b2batch.Parameter()

    def requires(self):
        return [Part(n=i, tag=self.tag) for i in range(args.count)]

    def output(self):
        yield self.add_to_output("total.json")

    def run(self):
        record(self.get_output_file_name("total.json"), parts=self.get_input_file_names("part.json"))


if __name__ == "__main__":
    print(f"steering pid {os.getpid()}", flush=True)
    b2batch.process(Total(tag=args.my_flag))
