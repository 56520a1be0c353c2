# --dry-run after everything ran: all tasks finished.
# args:
# args: --dry-run
import b2luigi


class MyTask(b2luigi.Task):
    n = b2luigi.IntParameter()

    def output(self):
        yield self.add_to_output("out.txt")

    def run(self):
        with open(self.get_output_file_name("out.txt"), "w") as f:
            f.write("x\n")


if __name__ == "__main__":
    b2luigi.process([MyTask(n=1), MyTask(n=2)], workers=1)
