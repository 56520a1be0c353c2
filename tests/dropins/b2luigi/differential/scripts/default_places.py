# No settings at all: where b2luigi puts results, and the script's own check of that place.
# args:
# args: --remove MyTask -y
import os

import b2luigi


class MyTask(b2luigi.Task):
    some_parameter = b2luigi.Parameter()

    def output(self):
        yield self.add_to_output("out.txt")

    def run(self):
        with open(self.get_output_file_name("out.txt"), "w") as f:
            f.write("done\n")


if __name__ == "__main__":
    try:
        b2luigi.process(MyTask(some_parameter="bla_blub"))
    finally:
        print("exists:", os.path.exists("some_parameter=bla_blub/out.txt"))
