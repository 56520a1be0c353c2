# batch_system = "test" (b2luigi's TestProcess) with --batch: each task runs as a background process; its
# prints go to the task's log files.
# args: --batch
import b2luigi


class MyTask(b2luigi.Task):
    batch_system = "test"
    n = b2luigi.IntParameter()

    def output(self):
        yield self.add_to_output("out.txt")

    def run(self):
        print(f"job {self.n} running")
        with open(self.get_output_file_name("out.txt"), "w") as f:
            f.write(f"{self.n}\n")


if __name__ == "__main__":
    b2luigi.process([MyTask(n=1), MyTask(n=2)], workers=2)
