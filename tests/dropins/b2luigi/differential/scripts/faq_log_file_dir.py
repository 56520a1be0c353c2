# b2luigi's FAQ: a task's get_log_file_dir() puts its batch job's logs into "logs" beside the script (found
# from sys.argv[0]), whatever the working directory.
# args: --batch
# allowed: D1: run 1 \(--batch\) stderr: extra line 'INFO: (Job \d+\.\d+: submitted task MyBatchTask\(n=\d\) to test|Job on test: job_per_task)
import os
import sys

import b2luigi


class MyBatchTask(b2luigi.Task):
    n = b2luigi.IntParameter()
    batch_system = "test"

    def get_log_file_dir(self):
        filename = os.path.realpath(sys.argv[0])
        return os.path.join(os.path.dirname(filename), "logs")

    def output(self):
        yield self.add_to_output("out.txt")

    def run(self):
        print("running", self.n)
        with open(self.get_output_file_name("out.txt"), "w") as f:
            f.write(str(self.n * 3))


if __name__ == "__main__":
    b2luigi.process([MyBatchTask(n=n) for n in range(2)], workers=2)
