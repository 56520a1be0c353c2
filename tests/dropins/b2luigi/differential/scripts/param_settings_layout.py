# parameter_separator and use_parameter_name_in_output change the layout of output paths.
# args:
import os

import b2luigi


class MyTask(b2luigi.Task):
    a = b2luigi.IntParameter()
    b = b2luigi.Parameter()

    def output(self):
        yield self.add_to_output("out.txt")

    def run(self):
        with open(self.get_output_file_name("out.txt"), "w") as f:
            f.write("ok\n")


if __name__ == "__main__":
    b2luigi.set_setting("use_parameter_name_in_output", False)
    print("no names:", os.path.relpath(MyTask(a=1, b="x").get_output_file_name("out.txt")))
    b2luigi.set_setting("use_parameter_name_in_output", True)
    b2luigi.set_setting("parameter_separator", ":")
    print("separator:", os.path.relpath(MyTask(a=1, b="x").get_output_file_name("out.txt")))
    b2luigi.process(MyTask(a=2, b="y"))
