# A task's remove_output(), called by the script itself.
# args:
import os

import b2luigi


class MyTask(b2luigi.Task):
    def output(self):
        yield self.add_to_output("a.txt")
        yield self.add_to_output("b.txt")

    def run(self):
        for name in self.get_all_output_file_names():
            with open(name, "w") as f:
                f.write("x\n")


if __name__ == "__main__":
    try:
        b2luigi.process(MyTask())
    except SystemExit:
        pass
    MyTask().remove_output()
    print("left:", sorted(os.listdir(".")))
