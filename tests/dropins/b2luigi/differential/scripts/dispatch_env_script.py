# env_script: sourced before a dispatched run() (b2luigi runs the child through its executable wrapper); started
# from another folder, the relative env_script is not found beside the script: the task fails, its stderr log
# says why.
# args:
# allowed: D2: files: missing task_files/\S+/executable_wrapper\.sh$
# allowed: D13: log logs/MyTask/stderr: missing line '<DIR>/task_files/MyTask/executable_wrapper\.sh: line \d+: setup_env\.sh: No such file or directory'
import os

import b2luigi

with open("setup_env.sh", "w") as f:
    f.write("export FROM_ENV_SCRIPT=sourced\n")


class MyTask(b2luigi.Task):
    env_script = "setup_env.sh"

    def output(self):
        yield self.add_to_output("env.txt")

    @b2luigi.dispatch
    def run(self):
        with open(self.get_output_file_name("env.txt"), "w") as f:
            f.write(f"{os.environ.get('FROM_ENV_SCRIPT')}\n")


if __name__ == "__main__":
    b2luigi.process(MyTask())
