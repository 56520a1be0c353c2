"""A batch system of one's own, written as b2luigi documents it: a BatchProcess subclass (start_job with the
task's executable wrapper, get_job_status, terminate_job) named by ``batch_system = "custom"`` and the task's
``process_class``. $FAIL makes one part fail; each start_job is logged in calls.log beside the script.
Runs unchanged under b2luigi 1.3.0 and through the shim (tests/dropins/b2luigi/test_b2luigi_batch.py compares them)."""

import os
import subprocess
import sys

import b2luigi
from b2luigi.batch.processes import BatchProcess, JobStatus
from b2luigi.core.executable import create_executable_wrapper
from b2luigi.core.utils import get_log_file_dir

CALLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "calls.log")


class MyProcess(BatchProcess):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._process = None

    def start_job(self):
        with open(CALLS, "a") as f:
            f.write(f"start {self.task}\n")
        wrapper = create_executable_wrapper(self.task)
        log = get_log_file_dir(self.task)
        os.makedirs(log, exist_ok=True)
        with open(os.path.join(log, "stdout"), "w") as out, open(os.path.join(log, "stderr"), "w") as err:
            self._process = subprocess.Popen([wrapper], stdout=out, stderr=err)

    def get_job_status(self):
        if self._process is None:
            return JobStatus.aborted
        code = self._process.poll()
        if code is None:
            return JobStatus.running
        return JobStatus.successful if code == 0 else JobStatus.aborted

    def terminate_job(self):
        if self._process is not None:
            self._process.kill()


class Part(b2luigi.Task):
    n = b2luigi.IntParameter()
    batch_system = MyProcess if os.environ.get("HOW") == "class" else "custom"
    process_class = MyProcess

    def output(self):
        yield self.add_to_output("part.txt")

    def run(self):
        if self.n < 0:
            raise RuntimeError("a failing part")
        with open(self.get_output_file_name("part.txt"), "w") as f:
            f.write(f"{self.n}\n")


class Total(b2luigi.WrapperTask):
    fail = b2luigi.BoolParameter(default=False)

    def requires(self):
        for n in range(3):
            yield Part(n=-1 if self.fail and n == 0 else n)


if __name__ == "__main__":
    b2luigi.set_setting("poll_interval", 0.2)
    b2luigi.set_setting("batch_system", "local")
    b2luigi.process(Total(fail=bool(os.environ.get("FAIL"))), batch=True, workers=3)
