# b2luigi's FAQ: the job command of a batch task: the executable setting (this interpreter), and
# task_cmd_additional_args appended to it, which the script then has to let through
# (ignore_additional_command_line_args).
# args: --batch
# allowed: D18: ^run 1 \(--batch\) files: content of args\.txt
# allowed: D1: run 1 \(--batch\) stderr: extra line 'INFO: (Job \d+\.\d+: submitted task MyTask\(\) to test|Job on test: job_per_task)
import sys

import b2luigi


class MyTask(b2luigi.Task):
    batch_system = "test"

    def output(self):
        yield self.add_to_output("args.txt")

    def run(self):
        with open(self.get_output_file_name("args.txt"), "w") as f:
            f.write(" ".join(arg for arg in sys.argv[1:] if not arg.startswith("MyTask")))


if __name__ == "__main__":
    b2luigi.set_setting("executable", [sys.executable])
    b2luigi.set_setting("task_cmd_additional_args", ["--name", "foo", "--import-variable", "bar"])
    b2luigi.process(MyTask(), ignore_additional_command_line_args=True)
