# process() called twice in one script: b2luigi refuses the second call.
# args:
import b2luigi


class MyTask(b2luigi.Task):
    n = b2luigi.IntParameter()

    def output(self):
        yield self.add_to_output("out.txt")

    def run(self):
        with open(self.get_output_file_name("out.txt"), "w") as f:
            f.write("x\n")


if __name__ == "__main__":
    b2luigi.process(MyTask(n=1))
    print("between")
    b2luigi.process(MyTask(n=2))
    print("after")
