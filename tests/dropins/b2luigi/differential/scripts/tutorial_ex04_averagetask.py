# b2luigi's tutorial, exercise 4: a task requires many others and writes two outputs from their inputs.
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


class MyAverageTask(b2luigi.Task):
    max_value = b2luigi.IntParameter()

    def requires(self):
        return [MyOtherTask(parameter=value) for value in range(self.max_value)]

    def output(self):
        yield self.add_to_output("average.txt")
        yield self.add_to_output("sum.txt")

    def run(self):
        numbers = []
        for name in self.get_input_file_names("squared.txt"):
            with open(name) as f:
                numbers.append(int(f.read()))
        with open(self.get_output_file_name("average.txt"), "w") as f:
            f.write(f"{sum(numbers) / len(numbers)}")
        with open(self.get_output_file_name("sum.txt"), "w") as f:
            f.write(f"{sum(numbers)}")


if __name__ == "__main__":
    b2luigi.set_setting("result_dir", "results")
    b2luigi.process(MyAverageTask(max_value=6))
