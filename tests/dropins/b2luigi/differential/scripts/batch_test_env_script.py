# env_script and env (set by set_setting) in a "test" batch job.
# args: --batch
import os

import b2luigi

with open("setup_env.sh", "w") as f:
    f.write("export FROM_ENV_SCRIPT=sourced\n")
b2luigi.set_setting("env_script", os.path.abspath("setup_env.sh"))
b2luigi.set_setting("env", {"FROM_ENV": "set"})


class MyTask(b2luigi.Task):
    batch_system = "test"

    def output(self):
        yield self.add_to_output("env.txt")

    def run(self):
        with open(self.get_output_file_name("env.txt"), "w") as f:
            f.write(f"{os.environ.get('FROM_ENV_SCRIPT')} {os.environ.get('FROM_ENV')}\n")


if __name__ == "__main__":
    b2luigi.process(MyTask())
