# @b2luigi.dispatch: run() in a child process, its prints in the task's log files.
# args:
# allowed: D2: files: missing task_files/\S+/executable_wrapper\.sh$
import b2luigi


class MyTask(b2luigi.Task):
    n = b2luigi.IntParameter()

    def output(self):
        yield self.add_to_output("out.txt")

    @b2luigi.dispatch
    def run(self):
        print("hello from the dispatched run")
        with open(self.get_output_file_name("out.txt"), "w") as f:
            f.write(f"{self.n}\n")


if __name__ == "__main__":
    b2luigi.process(MyTask(n=4))
