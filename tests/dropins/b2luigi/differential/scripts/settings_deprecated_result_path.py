# b2luigi's former setting name result_path is still read as result_dir.
# args:
import warnings

import b2luigi

warnings.simplefilter("ignore")


class MyTask(b2luigi.Task):
    def output(self):
        yield self.add_to_output("out.txt")

    def run(self):
        with open(self.get_output_file_name("out.txt"), "w") as f:
            f.write("x\n")


if __name__ == "__main__":
    b2luigi.set_setting("result_path", "old_results")
    b2luigi.process(MyTask())
