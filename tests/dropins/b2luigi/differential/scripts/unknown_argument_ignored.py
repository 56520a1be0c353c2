# ignore_additional_command_line_args=True lets the script's own flags through.
# args: --my-flag 3
import sys

import b2luigi


class MyTask(b2luigi.Task):
    def output(self):
        yield self.add_to_output("out.txt")

    def run(self):
        with open(self.get_output_file_name("out.txt"), "w") as f:
            f.write(" ".join(sys.argv[1:]) + "\n")


if __name__ == "__main__":
    b2luigi.process(MyTask(), ignore_additional_command_line_args=True)
