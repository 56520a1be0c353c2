# LocalTarget's docstrings: temporary_path() writes to a temporary file moved into place when the block ends;
# get_temporary_input() reads a copy of the target.
# args:
import b2luigi


class Writer(b2luigi.Task):
    def output(self):
        yield self.add_to_output("data.txt")

    def run(self):
        target = self._get_output_target("data.txt")
        with target.temporary_path() as tmp_output:
            with open(tmp_output, "w") as f:
                f.write("result data")


class Reader(b2luigi.Task):
    def requires(self):
        return Writer()

    def output(self):
        yield self.add_to_output("copy.txt")

    def run(self):
        target = self._get_input_targets("data.txt")[0]
        with target.get_temporary_input() as tmp_input:
            with open(tmp_input) as f:
                text = f.read()
        with open(self.get_output_file_name("copy.txt"), "w") as f:
            f.write(text.upper())


if __name__ == "__main__":
    b2luigi.process(Reader())
