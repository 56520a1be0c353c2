# requires() returning a dict; get_input_file_names_from_dict.
# args:
import os

import b2luigi


class Data(b2luigi.Task):
    kind = b2luigi.Parameter()

    def output(self):
        yield self.add_to_output("data.txt")

    def run(self):
        with open(self.get_output_file_name("data.txt"), "w") as f:
            f.write(self.kind + "\n")


class Fit(b2luigi.Task):
    def requires(self):
        return {"signal": Data(kind="sig"), "background": Data(kind="bkg")}

    def output(self):
        yield self.add_to_output("fit.txt")

    def run(self):
        signal = self.get_input_file_names_from_dict("signal", "data.txt")
        everything = self.get_input_file_names_from_dict("background")
        with open(self.get_output_file_name("fit.txt"), "w") as f:
            f.write(os.path.relpath(signal[0]) + "\n")
            f.write(str(sorted(everything)) .replace(os.getcwd(), ".") + "\n")


if __name__ == "__main__":
    b2luigi.process(Fit(), workers=1)
