# A failing task with the script's own check: it ends with a status of its own choice.
# args:
import sys

import b2luigi


class Broken(b2luigi.Task):
    def output(self):
        yield self.add_to_output("broken.txt")

    def run(self):
        raise OSError("disk full")


if __name__ == "__main__":
    b2luigi.process(Broken())
    sys.exit(0 if Broken().complete() else 4)
