"""A b2luigi 1.3 script as b2luigi's own test scripts write it (run with the shim): batch_system "test",
BatchIntParameter, b2luigi's module paths, and on_temporary_files with and without its options.

$B2LUIGI_API_FAIL makes run() raise inside on_temporary_files; $B2LUIGI_API_GRID asks for batch_system "gbasf2".
"""

import os

import b2luigi
from b2luigi.batch.processes.test import TestProcess  # noqa: F401  (b2luigi's module path)
from b2luigi.core.parameter import BatchIntParameter
from b2luigi.core.task import Task
from b2luigi.core.temporary_wrapper import on_temporary_files


class Part(Task):
    batch_system = "gbasf2" if os.environ.get("B2LUIGI_API_GRID") else "test"
    n = BatchIntParameter()

    def output(self):
        yield self.add_to_output("part.txt")

    @on_temporary_files
    def run(self):
        with open(self.get_output_file_name("part.txt"), "w") as f:
            f.write(f"{self.n} pid={os.getpid()}\n")
            if os.environ.get("B2LUIGI_API_FAIL") and self.n == 1:
                raise RuntimeError("part 1 broke half way")


class Total(b2luigi.Task):
    batch_system = "test"

    def requires(self):
        for n in range(3):
            yield Part(n=n)

    def output(self):
        yield self.add_to_output("total.txt")

    @b2luigi.on_temporary_files(inputs=False)
    def run(self):
        with open(self.get_output_file_name("total.txt"), "w") as f:
            f.write("".join(open(p).read() for p in sorted(self.get_input_file_names("part.txt"))))


if __name__ == "__main__":
    print(f"steering pid {os.getpid()}", flush=True)
    b2luigi.process(Total(), workers=3)
