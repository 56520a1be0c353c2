# hidden=True parameters are left out of output paths.
# args:
import os

import b2luigi


class MyTask(b2luigi.Task):
    visible = b2luigi.IntParameter()
    secret = b2luigi.Parameter(hidden=True)

    def output(self):
        yield self.add_to_output("out.txt")

    def run(self):
        with open(self.get_output_file_name("out.txt"), "w") as f:
            f.write(self.secret + "\n")


if __name__ == "__main__":
    task = MyTask(visible=1, secret="s3cr3t")
    print("path:", os.path.relpath(task.get_output_file_name("out.txt")))
    b2luigi.process(task)
