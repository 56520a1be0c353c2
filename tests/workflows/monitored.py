"""Four tasks that run until the test releases each (a file go-<n> in the working folder); task 3 fails.
For b2batch monitor's tests: the counts change when the test says so, not by the clock."""

import os
import sys
import time

import b2batch


class Held(b2batch.Task):
    n = b2batch.IntParameter()

    def output(self):
        yield self.add_to_output("out.txt")

    def run(self):
        print(f"task {self.n} is working", flush=True)
        release = os.path.join(os.environ["MONITORED_FOLDER"], f"go-{self.n}")
        deadline = time.time() + 120
        while not os.path.exists(release) and time.time() < deadline:
            time.sleep(0.05)
        if self.n == 3:
            print("task 3 breaks on purpose", file=sys.stderr, flush=True)
            raise RuntimeError("task 3 breaks on purpose")
        with open(self.get_output_file_name("out.txt"), "w") as f:
            f.write("done\n")


class AllHeld(b2batch.WrapperTask):
    def requires(self):
        for n in range(4):
            yield Held(n=n)


if __name__ == "__main__":
    b2batch.set_setting("local_slots", 4)
    b2batch.process(AllHeld(), workers=4)
