# b2luigi's parameter grouping page: a grouped parameter with max_grouping_size, on a batch system b2luigi
# 1.3.0 does not group on ("test").
# args: --batch
# allowed: D15: .*
import b2luigi


class MyTask(b2luigi.Task):
    my_parameter = b2luigi.IntParameter(grouping=True)
    max_grouping_size = 2
    batch_system = "test"

    def output(self):
        yield self.add_to_output("out.txt")

    def run(self):
        with open(self.get_output_file_name("out.txt"), "w") as f:
            f.write(str(self.my_parameter))


class All(b2luigi.WrapperTask):
    def requires(self):
        return [MyTask(my_parameter=p) for p in range(3)]


if __name__ == "__main__":
    b2luigi.process(All())
