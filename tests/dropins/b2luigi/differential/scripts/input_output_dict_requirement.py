# b2luigi's input/output page and its dict-requirement example: requires() returns a dict of task groups,
# get_input_file_names_from_dict() with and without a file key; imported as "import b2luigi as luigi", and the
# old setting name result_path.
# args:
import b2luigi as luigi


class TaskA(luigi.Task):
    central_value = luigi.FloatParameter()
    index = luigi.IntParameter()

    def run(self):
        with open(self.get_output_file_name("numbers.txt"), "w") as f:
            for step in range(5):
                f.write(f"{self.central_value + step - 2}\n")

    def output(self):
        yield self.add_to_output("numbers.txt")


class TaskB(luigi.Task):
    def requires(self):
        return {
            "a": (TaskA(5.0, i) for i in range(3)),
            "b": (TaskA(1.0, i) for i in range(3)),
        }

    @staticmethod
    def average_file(name):
        with open(name) as f:
            values = [float(line) for line in f]
        return sum(values) / len(values)

    def run(self):
        print(sorted(self.get_input_file_names_from_dict("a")))
        a = [self.average_file(n) for n in self.get_input_file_names_from_dict("a", "numbers.txt")]
        b = [self.average_file(n) for n in self.get_input_file_names_from_dict("b")["numbers.txt"]]
        with open(self.get_output_file_name("combined_average.txt"), "w") as f:
            f.write(f"{(sum(a) / len(a) + sum(b) / len(b)) / 2}\n")

    def output(self):
        yield self.add_to_output("combined_average.txt")


if __name__ == "__main__":
    luigi.set_setting("result_path", "results")
    luigi.process(TaskB(), workers=1)  # more: luigi orders its lines at random
