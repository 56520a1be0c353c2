# A task's own get_log_file_dir() (b2luigi's FAQ) is where its job's, and a dispatched run()'s, stdout and
# stderr go.
# args:
# allowed: D1: run 1 \(no arguments\) stderr: extra line 'INFO: (Job \d+\.\d+: submitted task Job\(n=1\) to test|Job on test: job_per_task)
# allowed: D2: files: missing task_files/Dispatched/executable_wrapper\.sh$
import os
import b2luigi


class Job(b2luigi.Task):
    batch_system = "test"
    n = b2luigi.IntParameter()

    def get_log_file_dir(self):
        return os.path.join("logs", "own", f"job_{self.n}")

    def output(self):
        yield self.add_to_output("job.txt")

    def run(self):
        print("job says hello", self.n)
        with open(self.get_output_file_name("job.txt"), "w") as f:
            f.write("done")


class Dispatched(b2luigi.Task):
    def requires(self):
        yield Job(n=1)

    def get_log_file_dir(self):
        return "logs/own/dispatched/"

    def output(self):
        yield self.add_to_output("dispatched.txt")

    @b2luigi.dispatch
    def run(self):
        print("dispatched says hello")
        with open(self.get_output_file_name("dispatched.txt"), "w") as f:
            f.write("done")


if __name__ == "__main__":
    b2luigi.process(Dispatched(), workers=1)
