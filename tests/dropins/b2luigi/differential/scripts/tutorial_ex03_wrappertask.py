# b2luigi's tutorial, exercise 3: a WrapperTask requires a chain for each value, result_dir set in the
# script; a second run finds everything complete, a third with --dry-run says so.
# args:
# args:
# args: --dry-run
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


class MyWrapperTask(b2luigi.WrapperTask):
    max_value = b2luigi.IntParameter()

    def requires(self):
        return [MyOtherTask(parameter=value) for value in range(self.max_value)]


if __name__ == "__main__":
    b2luigi.set_setting("result_dir", "results")
    b2luigi.process(MyWrapperTask(max_value=5))
