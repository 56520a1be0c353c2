# b2luigi's tutorial, exercise 1: one task with a string parameter, its run() and output().
# args:
# args:
import b2luigi


class MyTask(b2luigi.Task):
    parameter = b2luigi.Parameter()

    def run(self):
        with open(self.get_output_file_name("output.txt"), "w") as f:
            f.write(f"value {self.parameter}")

    def output(self):
        yield self.add_to_output("output.txt")


if __name__ == "__main__":
    b2luigi.process(MyTask(parameter=4))
