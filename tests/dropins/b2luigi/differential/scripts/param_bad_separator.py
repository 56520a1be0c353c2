# A parameter value with a path separator in it cannot be an output folder.
# args:
import b2luigi


class MyTask(b2luigi.Task):
    where = b2luigi.Parameter()

    def output(self):
        yield self.add_to_output("out.txt")

    def run(self):
        with open(self.get_output_file_name("out.txt"), "w") as f:
            f.write("ok\n")


if __name__ == "__main__":
    try:
        MyTask(where="a/b").get_output_file_name("out.txt")
    except Exception as error:
        print("error type:", type(error).__name__)
    b2luigi.process(MyTask(where="a/b"))
