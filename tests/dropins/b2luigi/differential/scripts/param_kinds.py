# Parameters of several kinds in output paths: bool, float, date, choice, dict, optional.
# args:
import datetime
import os

import b2luigi


class MyTask(b2luigi.Task):
    flag = b2luigi.BoolParameter(default=True)
    ratio = b2luigi.FloatParameter(default=0.5)
    day = b2luigi.DateParameter(default=datetime.date(2024, 2, 29))
    mode = b2luigi.ChoiceParameter(choices=["fast", "slow"], default="slow")
    config = b2luigi.DictParameter(default={"x": 1})
    maybe = b2luigi.OptionalParameter(default=None)

    def output(self):
        yield self.add_to_output("out.txt")

    def run(self):
        with open(self.get_output_file_name("out.txt"), "w") as f:
            f.write("ok\n")


if __name__ == "__main__":
    task = MyTask()
    print("path:", os.path.relpath(task.get_output_file_name("out.txt")))
    b2luigi.process(task)
