# hash_function= gives the text that stands for a value in the output path (with hashed=True; alone it does
# nothing in b2luigi 1.3).
# args:
import os

import b2luigi


def short(value):
    return "len" + str(len(value))


class MyTask(b2luigi.Task):
    values = b2luigi.ListParameter(hashed=True, hash_function=short)
    other = b2luigi.Parameter(hash_function=short)

    def output(self):
        yield self.add_to_output("out.txt")

    def run(self):
        with open(self.get_output_file_name("out.txt"), "w") as f:
            f.write(f"{list(self.values)}\n")


if __name__ == "__main__":
    task = MyTask(values=[1, 2, 3], other="abc")
    print("path:", os.path.relpath(task.get_output_file_name("out.txt")))
    b2luigi.process(task)
