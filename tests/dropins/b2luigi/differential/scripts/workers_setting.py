# The workers setting in settings.json is the number of luigi workers.
# args:
import json

import b2luigi

with open("settings.json", "w") as f:
    json.dump({"workers": 2}, f)


class MyTask(b2luigi.Task):
    n = b2luigi.IntParameter()

    def output(self):
        yield self.add_to_output("out.txt")

    def run(self):
        with open(self.get_output_file_name("out.txt"), "w") as f:
            f.write(f"{self.n}\n")


if __name__ == "__main__":
    b2luigi.process([MyTask(n=1)])
