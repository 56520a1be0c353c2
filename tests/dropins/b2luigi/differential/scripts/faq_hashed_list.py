# b2luigi's FAQ: a list parameter whose values cannot be folder names ("bad / signs") is hashed=True, so the
# output path holds hashed_<md5> instead.
# args:
import b2luigi


class MyTask(b2luigi.Task):
    my_parameter = b2luigi.ListParameter(hashed=True)

    def run(self):
        with open(self.get_output_file_name("test.txt"), "w") as f:
            f.write("written")

    def output(self):
        yield self.add_to_output("test.txt")


if __name__ == "__main__":
    b2luigi.process(MyTask(my_parameter=["One", "odd", "list", "with", "a / slash"]))
