# --show-output of tasks with hashed and hidden parameters, none of them run.
# args: --show-output
import b2luigi


class MyTask(b2luigi.Task):
    files = b2luigi.ListParameter(hashed=True)
    note = b2luigi.Parameter(hidden=True, default="x")
    n = b2luigi.IntParameter()

    def output(self):
        yield self.add_to_output("a.root")
        yield self.add_to_output("b.root")


if __name__ == "__main__":
    b2luigi.process([MyTask(files=["f1", "f2"], n=i) for i in range(2)])
