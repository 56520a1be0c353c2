# process()'s docstring: numbered tasks with a plain string parameter each write a LocalTarget named in
# output() (no result_dir set); process() takes a list of tasks.
# args:
# args: --dry-run
import b2luigi


class MyNumberTask(b2luigi.Task):
    some_parameter = b2luigi.Parameter()

    def output(self):
        return b2luigi.LocalTarget(f"results/output_file_{self.some_parameter}.txt")

    def run(self):
        with self.output().open("w") as f:
            f.write(f"{len(str(self.some_parameter)) / 4}\n")


if __name__ == "__main__":
    b2luigi.process([MyNumberTask(some_parameter=i) for i in range(12)])
