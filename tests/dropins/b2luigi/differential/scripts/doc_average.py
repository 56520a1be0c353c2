# b2luigi's quick start, second part: an average over tasks found by clone() and add_to_output().
# args:
# args: --dry-run
import b2luigi


class MyNumberTask(b2luigi.Task):
    some_parameter = b2luigi.IntParameter()

    def output(self):
        yield self.add_to_output("output_file.txt")

    def run(self):
        with open(self.get_output_file_name("output_file.txt"), "w") as f:
            f.write(f"{self.some_parameter / 2}\n")


class MyAverageTask(b2luigi.Task):
    def requires(self):
        for i in range(3):
            yield self.clone(MyNumberTask, some_parameter=i)

    def output(self):
        yield self.add_to_output("average.txt")

    def run(self):
        numbers = []
        for name in sorted(self.get_input_file_names("output_file.txt")):
            with open(name) as f:
                numbers.append(float(f.read()))
        with self.get_output_file("average.txt").open("w") as f:
            f.write(f"{sum(numbers) / len(numbers)}\n")


if __name__ == "__main__":
    b2luigi.process(MyAverageTask(), workers=1)
