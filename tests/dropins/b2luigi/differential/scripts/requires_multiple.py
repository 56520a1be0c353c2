# @b2luigi.requires of two tasks; get_input_file_names() as a dict of lists.
# args:
import b2luigi


class Left(b2luigi.Task):
    n = b2luigi.IntParameter()

    def output(self):
        yield self.add_to_output("left.txt")

    def run(self):
        with open(self.get_output_file_name("left.txt"), "w") as f:
            f.write("L\n")


class Right(b2luigi.Task):
    n = b2luigi.IntParameter()

    def output(self):
        yield self.add_to_output("right.txt")

    def run(self):
        with open(self.get_output_file_name("right.txt"), "w") as f:
            f.write("R\n")


@b2luigi.requires(Left, Right)
class Both(b2luigi.Task):
    def output(self):
        yield self.add_to_output("both.txt")

    def run(self):
        inputs = self.get_input_file_names()
        with open(self.get_output_file_name("both.txt"), "w") as f:
            f.write(" ".join(sorted(inputs)) + "\n")
            f.write(str(sorted(len(v) for v in inputs.values())) + "\n")


if __name__ == "__main__":
    b2luigi.process(Both(n=1), workers=1)
