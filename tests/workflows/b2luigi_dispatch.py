"""A b2luigi workflow with dispatched tasks: one crashes with a segmentation fault, one works."""

import os
import signal

import b2luigi


class Crash(b2luigi.Task):
    how = b2luigi.Parameter(default="segfault")

    def output(self):
        yield self.add_to_output("never.txt")

    @b2luigi.dispatch
    def run(self):
        print(f"child {os.getpid()} about to crash", flush=True)
        os.kill(os.getpid(), signal.SIGSEGV)


class Works(b2luigi.DispatchableTask):
    def output(self):
        yield self.add_to_output("pid.txt")

    def process(self):
        print("hello from the dispatched process", flush=True)
        with open(self.get_output_file_name("pid.txt"), "w") as f:
            f.write(str(os.getpid()))


class Both(b2luigi.WrapperTask):
    def requires(self):
        yield Crash()
        yield Works()


if __name__ == "__main__":
    print(f"steering pid {os.getpid()}", flush=True)
    b2luigi.process(Both(), workers=1)
