# on_temporary_files in a "test" batch job: the outputs appear only when run() ended well.
# args: --batch
import b2luigi


class MyTask(b2luigi.Task):
    batch_system = "test"
    n = b2luigi.IntParameter()

    def output(self):
        yield self.add_to_output("result.txt")

    @b2luigi.on_temporary_files
    def run(self):
        with open(self.get_output_file_name("result.txt"), "w") as f:
            f.write(f"{self.n}\n")
        if self.n == 2:
            raise RuntimeError("the second one fails after writing")


if __name__ == "__main__":
    b2luigi.process([MyTask(n=1), MyTask(n=2)], workers=1)
