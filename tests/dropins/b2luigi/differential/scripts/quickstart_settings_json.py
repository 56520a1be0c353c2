# b2luigi's quick start: result_dir given in a settings.json beside the script instead of set_setting (the
# script writes that file first). Started from another folder, b2luigi looks for settings.json in the working
# directory and its parents, not beside the script.
# args:
# args: --show-output
import json
import os

import b2luigi


class MyNumberTask(b2luigi.Task):
    some_parameter = b2luigi.IntParameter()

    def output(self):
        yield self.add_to_output("output_file.txt")

    def run(self):
        with open(self.get_output_file_name("output_file.txt"), "w") as f:
            f.write(f"{self.some_parameter + 0.5}\n")


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "settings.json"), "w") as f:
        json.dump({"result_dir": "results"}, f)
    b2luigi.process([MyNumberTask(some_parameter=i) for i in range(3)])
