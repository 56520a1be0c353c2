# --test with a task whose output folder (a parameter's) does not exist yet.
# args: --test
# allowed: D3: ^run 1 \(--test\) (stderr: (missing|extra) line|files: extra n=1/out.txt)
import b2luigi


class MyTask(b2luigi.Task):
    n = b2luigi.IntParameter()

    def output(self):
        yield self.add_to_output("out.txt")

    def run(self):
        with open(self.get_output_file_name("out.txt"), "w") as f:
            f.write("t\n")


if __name__ == "__main__":
    b2luigi.process(MyTask(n=1))
