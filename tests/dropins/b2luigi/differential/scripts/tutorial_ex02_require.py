# b2luigi's tutorial, exercise 2: a second task requires the first and reads its output through
# get_input_file_names.
# args:
import b2luigi


class MyTask(b2luigi.Task):
    parameter = b2luigi.IntParameter()

    def run(self):
        with open(self.get_output_file_name("output.txt"), "w") as f:
            f.write(f"{self.parameter}")

    def output(self):
        yield self.add_to_output("output.txt")


class MyOtherTask(b2luigi.Task):
    parameter = b2luigi.IntParameter()

    def requires(self):
        return MyTask(parameter=self.parameter)

    def output(self):
        yield self.add_to_output("squared.txt")

    def run(self):
        with open(self.get_input_file_names("output.txt")[0]) as f:
            number = int(f.read())
        with open(self.get_output_file_name("squared.txt"), "w") as f:
            f.write(f"{number ** 2}")


if __name__ == "__main__":
    b2luigi.process(MyOtherTask(parameter=3))
