# The underscore helpers user code calls: _get_input_targets, _get_output_target, _get_output_file_target.
# args:
import os

import b2luigi


class Producer(b2luigi.Task):
    def output(self):
        yield self.add_to_output("p.txt")

    def run(self):
        target = self._get_output_target("p.txt")
        with target.open("w") as f:
            f.write("produced\n")


class Consumer(b2luigi.Task):
    def requires(self):
        return Producer()

    def output(self):
        yield self.add_to_output("c.txt")

    def run(self):
        (target,) = self._get_input_targets("p.txt")
        print("input target:", type(target).__name__, os.path.relpath(target.path))
        with target.open("r") as f, open(self.get_output_file_name("c.txt"), "w") as out:
            out.write(f.read())
            out.write(os.path.relpath(self._get_output_file_target("c.txt").path) + "\n")


if __name__ == "__main__":
    b2luigi.process(Consumer(), workers=1)
