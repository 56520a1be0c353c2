# DispatchableTask: the work in process(), run in a child.
# args:
# allowed: D2: files: missing task_files/\S+/executable_wrapper\.sh$
import b2luigi


class MyTask(b2luigi.DispatchableTask):
    n = b2luigi.IntParameter()

    def output(self):
        yield self.add_to_output("out.txt")

    def process(self):
        with open(self.get_output_file_name("out.txt"), "w") as f:
            f.write(f"{self.n * 2}\n")


if __name__ == "__main__":
    b2luigi.process([MyTask(n=1), MyTask(n=2)], workers=1)
