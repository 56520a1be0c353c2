# An external requirement that exists (a relative LocalTarget), used by get_input_file_names.
# args:
import os

import b2luigi

os.makedirs("data", exist_ok=True)
with open("data/raw.txt", "w") as f:
    f.write("raw\n")


class RawData(b2luigi.ExternalTask):
    def output(self):
        return {"raw.txt": b2luigi.LocalTarget("data/raw.txt")}


class Analysis(b2luigi.Task):
    def requires(self):
        return RawData()

    def output(self):
        yield self.add_to_output("analysis.txt")

    def run(self):
        (name,) = self.get_input_file_names("raw.txt")
        with open(name) as f, open(self.get_output_file_name("analysis.txt"), "w") as out:
            out.write(f.read().upper())


if __name__ == "__main__":
    b2luigi.process(Analysis())
