# --test: tasks run here, one at a time, luigi logging at DEBUG (the tasks make their own folders: b2luigi
# 1.3.0's --test does not; run_in_test_mode_folders.py shows that).
# args: --test
import os

import b2luigi


class Raw(b2luigi.Task):
    n = b2luigi.IntParameter()

    def output(self):
        yield self.add_to_output("raw.txt")

    def run(self):
        os.makedirs(os.path.dirname(self.get_output_file_name("raw.txt")), exist_ok=True)
        with open(self.get_output_file_name("raw.txt"), "w") as f:
            f.write(f"{self.n}\n")


class Reco(b2luigi.Task):
    n = b2luigi.IntParameter()

    def requires(self):
        return Raw(n=self.n)

    def output(self):
        yield self.add_to_output("reco.txt")

    def run(self):
        os.makedirs(os.path.dirname(self.get_output_file_name("reco.txt")), exist_ok=True)
        with open(self.get_output_file_name("reco.txt"), "w") as f:
            f.write("reco\n")


class Plot(b2luigi.Task):
    def requires(self):
        for n in range(2):
            yield Reco(n=n)

    def output(self):
        yield self.add_to_output("plot.txt")

    def run(self):
        with open(self.get_output_file_name("plot.txt"), "w") as f:
            f.write("plot\n")


if __name__ == "__main__":
    b2luigi.process(Plot(), workers=1)
