# hashed=True parameters: the output path holds hashed_<md5> instead of the value; serialize_hashed.
# args:
import os

import b2luigi


class MyTask(b2luigi.Task):
    names = b2luigi.ListParameter(hashed=True)
    label = b2luigi.Parameter(hashed=True)
    n = b2luigi.IntParameter()

    def output(self):
        yield self.add_to_output("out.txt")

    def run(self):
        with open(self.get_output_file_name("out.txt"), "w") as f:
            f.write(",".join(self.names) + "\n")


if __name__ == "__main__":
    task = MyTask(names=["a", "b"], label="hello", n=3)
    print("path:", os.path.relpath(task.get_output_file_name("out.txt")))
    print("serialize_hashed:", MyTask.label.serialize_hashed("hello"))
    b2luigi.process(task)
