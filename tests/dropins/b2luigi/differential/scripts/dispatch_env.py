# env settings apply to a dispatched child (b2luigi's documented MY_SECRET_VARIABLE).
# args:
# allowed: D2: files: missing task_files/\S+/executable_wrapper\.sh$
import os

import b2luigi


class MyTask(b2luigi.Task):
    env = {"MY_SECRET_VARIABLE": "42"}

    def output(self):
        yield self.add_to_output("env.txt")

    @b2luigi.dispatch
    def run(self):
        with open(self.get_output_file_name("env.txt"), "w") as f:
            f.write(f"{os.environ.get('MY_SECRET_VARIABLE')}\n")


if __name__ == "__main__":
    b2luigi.process(MyTask())
