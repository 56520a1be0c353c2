# b2luigi's executable wrapper (create_executable_wrapper): its lines for a task with the settings env,
# env_script and working_dir (this interpreter's path shown as <PYTHON>), then the wrapper run as a job would
# run it: one task of the graph through --batch-runner --task-id, a failing one with exit status 1.
# args:
import os
import subprocess
import sys

import b2luigi
from b2luigi.core.executable import create_executable_wrapper


class Part(b2luigi.Task):
    n = b2luigi.IntParameter()

    def output(self):
        yield self.add_to_output("part.txt")

    def run(self):
        print(f"running part {self.n}, MY_VAR={os.environ['MY_VAR']}, FROM_SCRIPT={os.environ['FROM_SCRIPT']}")
        if self.n < 0:
            raise RuntimeError("a failing part")
        with open(self.get_output_file_name("part.txt"), "w") as f:
            f.write(f"{self.n}\n")


ROOTS = [Part(n=1), Part(n=2), Part(n=-1)]

if __name__ == "__main__":
    b2luigi.set_setting("result_dir", "results")
    if "--batch-runner" in sys.argv:
        b2luigi.process(ROOTS)
        sys.exit(0)
    with open("setup.sh", "w") as f:
        f.write("export FROM_SCRIPT=sourced\n")
    b2luigi.set_setting("working_dir", os.path.abspath("."))
    b2luigi.set_setting("env_script", "setup.sh")
    b2luigi.set_setting("env", {"MY_VAR": "a b", "OTHER": "1"})
    for task in (Part(n=1), Part(n=-1)):
        wrapper = create_executable_wrapper(task)
        print(os.path.basename(wrapper), "executable:", os.access(wrapper, os.X_OK))
        with open(wrapper) as f:
            for line in f.read().splitlines():
                print("  |", line.replace(sys.executable, "<PYTHON>"))
        done = subprocess.run([wrapper], capture_output=True, text=True)
        print("exit status", done.returncode)
        print("task's output:", [line for line in done.stdout.splitlines() if line.startswith("running")])
        print("outputs:", sorted(os.path.join(d, n) for d, _, names in os.walk("results") for n in names))
