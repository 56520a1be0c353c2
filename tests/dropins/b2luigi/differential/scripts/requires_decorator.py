# @b2luigi.requires with a fixed parameter, and get_input_file_names of the required task.
# args:
import b2luigi


class TaskA(b2luigi.Task):
    some_parameter = b2luigi.IntParameter()
    some_other_parameter = b2luigi.IntParameter()

    def output(self):
        yield self.add_to_output("test.txt")

    def run(self):
        with open(self.get_output_file_name("test.txt"), "w") as f:
            f.write(f"{self.some_parameter}-{self.some_other_parameter}\n")


@b2luigi.requires(TaskA, some_parameter=3)
class TaskB(b2luigi.Task):
    another_parameter = b2luigi.IntParameter()

    def output(self):
        yield self.add_to_output("out.dat")

    def run(self):
        (name,) = self.get_input_file_names("test.txt")
        with open(name) as f, open(self.get_output_file_name("out.dat"), "w") as out:
            out.write(f.read().strip() + f"/{self.another_parameter}\n")


if __name__ == "__main__":
    print(sorted(name for name, _ in TaskB.get_params()))
    b2luigi.process(TaskB(another_parameter=5, some_other_parameter=4))
