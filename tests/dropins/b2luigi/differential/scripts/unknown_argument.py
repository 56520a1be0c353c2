# An argument the script does not know.
# args: --no-such-flag
import b2luigi


class MyTask(b2luigi.Task):
    def output(self):
        yield self.add_to_output("out.txt")

    def run(self):
        with open(self.get_output_file_name("out.txt"), "w") as f:
            f.write("x\n")


if __name__ == "__main__":
    b2luigi.process(MyTask())
