# b2luigi's parameters page: a parameter with significant=False is no part of the task's identity and not of
# its output path; two tasks that differ only there are one task.
# args:
import b2luigi


class MyTask(b2luigi.Task):
    name = b2luigi.Parameter()
    my_parameter = b2luigi.Parameter(significant=False)

    def output(self):
        yield self.add_to_output("out.txt")

    def run(self):
        with open(self.get_output_file_name("out.txt"), "w") as f:
            f.write(f"{self.name} {self.my_parameter}")


if __name__ == "__main__":
    b2luigi.process([MyTask(name="a", my_parameter="x"), MyTask(name="a", my_parameter="y"),
                     MyTask(name="b", my_parameter="z")])
