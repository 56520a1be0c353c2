# A dispatched run() that exits badly fails the task; the script goes on.
# args:
# allowed: D2: files: missing task_files/\S+/executable_wrapper\.sh$
import sys

import b2luigi


class Crash(b2luigi.Task):
    def output(self):
        yield self.add_to_output("never.txt")

    @b2luigi.dispatch
    def run(self):
        print("about to fail", file=sys.stderr)
        sys.exit(3)


if __name__ == "__main__":
    b2luigi.process(Crash())
    print("after process")
