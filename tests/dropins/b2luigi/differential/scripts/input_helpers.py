# get_input_file_name, get_all_input_file_names, get_all_output_file_names, get_output_file.
# args:
import os

import b2luigi


class Producer(b2luigi.Task):
    def output(self):
        yield self.add_to_output("one.txt")
        yield self.add_to_output("two.txt")

    def run(self):
        for name in self.get_all_output_file_names():
            with open(name, "w") as f:
                f.write(os.path.basename(name) + "\n")


class Consumer(b2luigi.Task):
    def requires(self):
        return Producer()

    def output(self):
        return self.add_to_output("sum.txt")

    def run(self):
        names = sorted(os.path.basename(n) for n in self.get_all_input_file_names())
        with self.get_output_file("sum.txt").open("w") as f:
            f.write(" ".join(names) + "\n")
            f.write(os.path.relpath(self.get_input_file_name("one.txt")) + "\n")


if __name__ == "__main__":
    b2luigi.process(Consumer(), workers=1)
