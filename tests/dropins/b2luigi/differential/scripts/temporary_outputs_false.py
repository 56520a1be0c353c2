# @on_temporary_files(outputs=False): outputs are written in place.
# args:
import os

import b2luigi


class MyTask(b2luigi.Task):
    def output(self):
        yield self.add_to_output("direct.txt")

    @b2luigi.on_temporary_files(outputs=False)
    def run(self):
        name = self.get_output_file_name("direct.txt")
        print("in place:", os.path.basename(name) == "direct.txt")
        with open(name, "w") as f:
            f.write("d\n")


if __name__ == "__main__":
    b2luigi.process(MyTask())
