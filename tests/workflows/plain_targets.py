"""A task written for plain luigi (a LocalTarget output, a parameter holding a path) run as a job."""

import os
import sys

import luigi

import b2batch


class Copy(b2batch.Task):
    source = b2batch.Parameter()

    def output(self):
        return luigi.LocalTarget(os.path.join(os.path.dirname(os.path.abspath(__file__)), "copied.txt"))

    def run(self):
        with open(self.source) as f, self.output().open("w") as out:
            out.write(f.read())


if __name__ == "__main__":
    b2batch.process(Copy(source=sys.argv[1]), batch=True, batch_system="local")
