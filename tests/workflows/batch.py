"""Parts -> Total for the batch tests. Each part records where, when and how it ran (JSON); flags of the
script choose how many parts there are, how long they sleep and which one fails, and how."""

import argparse
import json
import os
import sys
import time
from pathlib import Path

import b2batch

parser = argparse.ArgumentParser()
parser.add_argument("--count", type=int, default=3)
parser.add_argument("--sleep", type=float, default=0.0)
parser.add_argument("--fail", type=int, default=-1, help="the part that fails")
parser.add_argument("--fail-mode", choices=["raise", "exit"], default="exit")
args, _unknown = parser.parse_known_args()

STARTED = Path(__file__).resolve().parent / "started"


class Part(b2batch.Task):
    n = b2batch.IntParameter()

    def output(self):
        yield self.add_to_output("part.json")

    def run(self):
        start = time.time()
        STARTED.mkdir(exist_ok=True)
        written = STARTED / f".{self.n}.pid.tmp"  # whole when it appears: a test reads it as soon as it is there
        written.write_text(str(os.getpid()))
        os.replace(written, STARTED / f"{self.n}.pid")
        print(f"part {self.n} runs in {os.getcwd()}")
        if self.n == args.fail:
            for i in range(30):
                print(f"part {self.n} complains, line {i}", file=sys.stderr)
            sys.stderr.flush()
            if args.fail_mode == "raise":
                raise RuntimeError(f"part {self.n} is broken")
            os._exit(7)
        time.sleep(args.sleep)
        with open(self.get_output_file_name("part.json"), "w") as f:
            json.dump({"pid": os.getpid(), "ppid": os.getppid(), "start": start, "end": time.time(),
                       "cwd": os.getcwd(), "argv": sys.argv[1:], "FROM_ENV": os.environ.get("FROM_ENV"),
                       "FROM_SETUP": os.environ.get("FROM_SETUP")}, f)


class Total(b2batch.Task):
    def requires(self):
        return [Part(n=i) for i in range(args.count)]

    def output(self):
        yield self.add_to_output("total.json")

    def run(self):
        with open(self.get_output_file_name("total.json"), "w") as f:
            json.dump({"pid": os.getpid(), "parts": self.get_input_file_names("part.json")}, f)


if __name__ == "__main__":
    print(f"steering pid {os.getpid()}", flush=True)
    b2batch.process(Total(), batch=True, batch_system="local", workers=max(args.count, 1))
