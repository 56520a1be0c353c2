# @b2luigi.on_temporary_files: outputs written under temporary names, moved in place at the end.
# args:
import os

import b2luigi


class MyTask(b2luigi.Task):
    def output(self):
        yield self.add_to_output("a.txt")
        yield self.add_to_output("b.txt")

    @b2luigi.on_temporary_files
    def run(self):
        for key in ("a.txt", "b.txt"):
            name = self.get_output_file_name(key)
            print("writes to final place:", name == os.path.abspath(os.path.join(key)))
            with open(name, "w") as f:
                f.write(key + "\n")


if __name__ == "__main__":
    b2luigi.process(MyTask())
