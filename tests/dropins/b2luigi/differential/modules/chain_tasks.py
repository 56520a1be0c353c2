"""Raw -> Reco -> Plot: the chain of tasks that several corpus scripts run (copied beside each script)."""
import b2luigi


class Raw(b2luigi.Task):
    n = b2luigi.IntParameter()

    def output(self):
        yield self.add_to_output("raw.txt")

    def run(self):
        with open(self.get_output_file_name("raw.txt"), "w") as f:
            f.write(f"{self.n}\n")


class Reco(b2luigi.Task):
    n = b2luigi.IntParameter()

    def requires(self):
        return Raw(n=self.n)

    def output(self):
        yield self.add_to_output("reco.txt")

    def run(self):
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
