"""A workflow whose outputs live under a remote result_dir (root://, davs://, dav://): Gen tasks write numbers,
Sum adds them up, reading its inputs from the server. ``--hang-at I`` makes Gen(i=I) write half its output,
touch ``--marker`` and wait to be killed."""

import argparse
import time

import luigi

import b2batch

parser = argparse.ArgumentParser()
parser.add_argument("--result-dir", required=True)
parser.add_argument("--n", type=int, default=3)
parser.add_argument("--hang-at", type=int, default=-1)
parser.add_argument("--marker", default="")
parser.add_argument("--retries", type=int, default=0)
args, _ = parser.parse_known_args()

b2batch.set_setting("result_dir", args.result_dir)
if args.retries:
    b2batch.set_setting("remote_retries", args.retries)


class Gen(b2batch.Task):
    i = b2batch.IntParameter()

    def output(self):
        yield self.add_to_output("number.txt")

    @b2batch.on_temporary_files
    def run(self):
        with open(self.get_output_file_name("number.txt"), "w") as f:
            f.write("partial ")
            f.flush()
            if self.i == args.hang_at:
                open(args.marker, "w").close()
                time.sleep(600)
            f.write(str(self.i * 10))


class Sum(b2batch.Task):
    n = b2batch.IntParameter()

    def requires(self):
        for i in range(self.n):
            yield Gen(i=i)

    def output(self):
        yield self.add_to_output("sum.txt")

    @b2batch.on_temporary_files
    def run(self):
        total = 0
        for target in luigi.task.flatten(self.input()):
            with target.open("r") as f:
                total += int(f.read().split()[-1])
        with open(self.get_output_file_name("sum.txt"), "w") as f:
            f.write(str(total))


if __name__ == "__main__":
    b2batch.process(Sum(n=args.n), workers=1)
