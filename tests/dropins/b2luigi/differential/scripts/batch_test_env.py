# env settings in a "test" batch job (the executable wrapper exports them).
# args: --batch
import os

import b2luigi


class MyTask(b2luigi.Task):
    batch_system = "test"
    env = {"MY_SECRET_VARIABLE": "42", "WITH_SPACE": "a b"}

    def output(self):
        yield self.add_to_output("env.txt")

    def run(self):
        with open(self.get_output_file_name("env.txt"), "w") as f:
            f.write(f"{os.environ.get('MY_SECRET_VARIABLE')} {os.environ.get('WITH_SPACE')}\n")


if __name__ == "__main__":
    b2luigi.process(MyTask())
