# b2luigi.build: luigi.build with a warning that process() is meant.
# args:
import warnings

import b2luigi


class MyTask(b2luigi.Task):
    def output(self):
        yield self.add_to_output("out.txt")

    def run(self):
        with open(self.get_output_file_name("out.txt"), "w") as f:
            f.write("x\n")


if __name__ == "__main__":
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = b2luigi.build([MyTask()], local_scheduler=True, log_level="WARNING")
    print("result:", result)
    print("warnings:", [type(w.message).__name__ for w in caught if "process" in str(w.message)])
