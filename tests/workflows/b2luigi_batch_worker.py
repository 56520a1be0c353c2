"""b2luigi's batch worker: ``python flow.py --batch-runner --task-id ID`` runs only that task (what b2luigi's
executable wrapper runs); ``python flow.py wrapper NAME`` writes the executable wrapper of one task with
``create_executable_wrapper`` and runs it; ``python flow.py first`` calls ``process(..., batch_runner=True)``.
Part(n=-1) writes half its output and fails; Dynamic yields Part(n=3) from run()."""

import subprocess
import sys

import b2luigi
from b2luigi.core.executable import create_executable_wrapper


class Part(b2luigi.Task):
    n = b2luigi.IntParameter()

    def output(self):
        yield self.add_to_output("part.txt")

    def run(self):
        with open(self.get_output_file_name("part.txt"), "w") as f:
            f.write(f"{self.n}\n")
            if self.n < 0:
                raise RuntimeError("a failing part")


class Dynamic(b2luigi.Task):
    def output(self):
        yield self.add_to_output("dynamic.txt")

    def run(self):
        part = Part(n=3)
        yield part
        with open(self.get_output_file_name("dynamic.txt"), "w") as f:
            f.write(open(part.get_output_file_name("part.txt")).read())


TASKS = {"part1": Part(n=1), "part2": Part(n=2), "broken": Part(n=-1), "dynamic": Dynamic()}

if __name__ == "__main__":
    b2luigi.set_setting("result_dir", "results")
    if sys.argv[1:2] == ["wrapper"]:
        done = subprocess.run([create_executable_wrapper(TASKS[sys.argv[2]])], capture_output=True, text=True)
        sys.stderr.write(done.stderr)
        print(f"wrapper exit status {done.returncode}")
    elif sys.argv[1:2] == ["first"]:
        b2luigi.process([Part(n=2), Part(n=1)], batch_runner=True)
    else:
        b2luigi.process([Part(n=1), Part(n=2), Part(n=-1), Part(n=3), Dynamic()])
