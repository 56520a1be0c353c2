# --test: a dispatched run() runs in place, its output on the terminal.
# args: --test
import b2luigi


class MyTask(b2luigi.Task):
    def output(self):
        yield self.add_to_output("out.txt")

    @b2luigi.dispatch
    def run(self):
        print("printed in place")
        with open(self.get_output_file_name("out.txt"), "w") as f:
            f.write("t\n")


if __name__ == "__main__":
    b2luigi.process(MyTask())
