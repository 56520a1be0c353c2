# --show-output: every task with its output files, existing or not.
# args:
# args: --show-output
import b2luigi


class Leaf(b2luigi.Task):
    n = b2luigi.IntParameter()

    def output(self):
        yield self.add_to_output("leaf.txt")

    def run(self):
        with open(self.get_output_file_name("leaf.txt"), "w") as f:
            f.write("x\n")


class Top(b2luigi.Task):
    def requires(self):
        yield Leaf(n=1)

    def output(self):
        yield self.add_to_output("top.txt")

    def run(self):
        raise RuntimeError("left undone on purpose")


if __name__ == "__main__":
    import os

    if not os.path.exists("n=1/leaf.txt"):
        b2luigi.process(Leaf(n=1))
    else:
        b2luigi.process(Top())
