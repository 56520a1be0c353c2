# b2luigi's quick start, second step: add_to_output puts each parameter value into the output path under the
# result_dir set in the script; --show-output then lists the outputs.
# args:
# args: --show-output
import b2luigi


class MyNumberTask(b2luigi.Task):
    some_parameter = b2luigi.IntParameter()

    def output(self):
        yield self.add_to_output("output_file.txt")

    def run(self):
        with open(self.get_output_file_name("output_file.txt"), "w") as f:
            f.write(f"{(self.some_parameter * 7) % 10 / 10}\n")


if __name__ == "__main__":
    b2luigi.set_setting("result_dir", "results")
    b2luigi.process([MyNumberTask(some_parameter=i) for i in range(6)], workers=1)  # more: luigi orders its lines at random
