# --dry-run with one of two tasks complete, and an external input that is missing.
# args:
# args: --dry-run
import os

import b2luigi


class Raw(b2luigi.ExternalTask):
    def output(self):
        return b2luigi.LocalTarget("raw_input.txt")


class Step(b2luigi.Task):
    n = b2luigi.IntParameter()

    def requires(self):
        if self.n == 2:
            yield Raw()

    def output(self):
        yield self.add_to_output("step.txt")

    def run(self):
        with open(self.get_output_file_name("step.txt"), "w") as f:
            f.write("s\n")


if __name__ == "__main__":
    if not os.path.exists("n=1"):
        b2luigi.process(Step(n=1))
    else:
        b2luigi.process([Step(n=1), Step(n=2)])
