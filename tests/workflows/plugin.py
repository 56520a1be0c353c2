"""A batch system added the way b2luigi documents it: a BatchProcess subclass with start_job, get_job_status
and kill_job for one task's job (here: the job's wrapper as a background process of this machine)."""

import subprocess
import sys
from pathlib import Path

import b2batch as b2luigi
from b2batch import BatchProcess, JobStatus

LOG = Path(__file__).resolve().parent / "plugin_calls.log"


class BackgroundProcess(BatchProcess):
    system_name = "background"

    def start_job(self):
        with LOG.open("a") as log:
            log.write(f"start {self.task.task_family}\n")
        self._process = subprocess.Popen([str(self.job_files.wrapper)], start_new_session=True)
        self.job_id = str(self._process.pid)

    def get_job_status(self):
        code = self._process.poll()
        if code is None:
            return JobStatus.running
        return JobStatus.successful if code == 0 else JobStatus.aborted

    def kill_job(self):
        self._process.terminate()


class Part(b2luigi.Task):
    n = b2luigi.IntParameter()

    def output(self):
        yield self.add_to_output("part.txt")

    @b2luigi.on_temporary_files
    def run(self):
        if self.n < 0:
            raise RuntimeError("a failing part")
        Path(self.get_output_file_name("part.txt")).write_text(f"{self.n}\n")


class Total(b2luigi.Task):
    count = b2luigi.IntParameter()
    fail = b2luigi.BoolParameter(default=False)

    def requires(self):
        for n in range(self.count):
            yield Part(n=-1 if self.fail and n == 0 else n)

    def output(self):
        yield self.add_to_output("total.txt")

    def run(self):
        total = sum(int(Path(p).read_text()) for p in self.get_input_file_names("part.txt"))
        Path(self.get_output_file_name("total.txt")).write_text(f"{total}\n")


if __name__ == "__main__":
    b2luigi.set_setting("batch_system", BackgroundProcess)
    b2luigi.set_setting("poll_interval", 0.2)
    fail = "--fail" in sys.argv
    b2luigi.process(Total(count=3, fail=fail), batch=True, workers=4)
