# A run() that fails inside on_temporary_files leaves no output behind.
# args:
import b2luigi


class MyTask(b2luigi.Task):
    def output(self):
        yield self.add_to_output("partial.txt")

    @b2luigi.on_temporary_files
    def run(self):
        with open(self.get_output_file_name("partial.txt"), "w") as f:
            f.write("half\n")
        raise RuntimeError("failed half way")


if __name__ == "__main__":
    b2luigi.process(MyTask())
