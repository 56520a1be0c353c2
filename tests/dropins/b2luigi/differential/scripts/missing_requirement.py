# An external requirement that does not exist: luigi's missing dependency; the script goes on.
# args:
import b2luigi


class RawData(b2luigi.ExternalTask):
    def output(self):
        return b2luigi.LocalTarget("data/raw.txt")


class Analysis(b2luigi.Task):
    def requires(self):
        return RawData()

    def output(self):
        yield self.add_to_output("analysis.txt")

    def run(self):
        with open(self.get_output_file_name("analysis.txt"), "w") as f:
            f.write("never\n")


if __name__ == "__main__":
    b2luigi.process(Analysis())
    print("after process")
