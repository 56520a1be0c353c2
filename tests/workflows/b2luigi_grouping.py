"""A b2luigi workflow with parameter grouping, as b2luigi documents it: ``seed`` is grouped, ``sample`` is
not, so the tasks of one sample share batch jobs, up to ``max_grouping_size`` (env GROUP_SIZE) per job.

    python b2luigi_grouping.py --batch [--samples 2 --seeds 10 --broken 3 --killed 5 --plugin --workers 9]

Each Simulate task writes its sample, seed and the process that ran it (pid, parent pid: in a group's job the
parent is the job's worker) to results/.../sim.txt. ``--broken N``: seed N of every sample raises.
``--killed N``: seed N of sample "a" writes its output and then kills the whole job it runs in, the first
time only (kills/<seed> remembers it, with the pid of the job's worker). ``--plugin``: the tasks run on a b2luigi BatchProcess plugin, which
runs one task per job. GROUP_SIZE is read as JSON, so that tests can give wrong values.
"""

import argparse
import json
import os
import signal
import subprocess

import b2luigi


class Simulate(b2luigi.Task):
    sample = b2luigi.Parameter()
    seed = b2luigi.IntParameter(grouping=True)
    broken = b2luigi.IntParameter(default=-1, significant=False)
    killed = b2luigi.IntParameter(default=-1, significant=False)

    max_grouping_size = json.loads(os.environ.get("GROUP_SIZE", "4"))

    def output(self):
        yield self.add_to_output("sim.txt")

    def run(self):
        if self.seed == self.broken:
            raise RuntimeError(f"seed {self.seed} is broken")
        if self.seed == self.killed and self.sample == "a" and not os.path.exists(f"kills/{self.seed}"):
            worker = os.getppid()
            os.makedirs("kills", exist_ok=True)
            with open(f"kills/{self.seed}", "w") as f:
                f.write(f"{worker}\n")
            with open(self.get_output_file_name("sim.txt"), "w") as f:  # written, then the job is killed
                f.write("partial\n")
            os.kill(worker, signal.SIGKILL)  # the job's worker, which runs this group
            os.killpg(0, signal.SIGKILL)  # and this task
        self.write()

    @b2luigi.on_temporary_files
    def write(self):
        with open(self.get_output_file_name("sim.txt"), "w") as f:
            f.write(f"{self.sample} {self.seed} {os.getpid()} {os.getppid()}\n")


class Histogram(b2luigi.Task):
    samples = b2luigi.IntParameter()
    seeds = b2luigi.IntParameter()
    broken = b2luigi.IntParameter(default=-1, significant=False)
    killed = b2luigi.IntParameter(default=-1, significant=False)

    def requires(self):
        for sample in "abcdefgh"[:self.samples]:
            for seed in range(self.seeds):
                yield Simulate(sample=sample, seed=seed, broken=self.broken, killed=self.killed)

    def output(self):
        yield self.add_to_output("histogram.txt")

    def run(self):
        lines = []
        for name in self.get_input_file_names("sim.txt"):
            with open(name) as f:
                lines.append(f.read())
        with open(self.get_output_file_name("histogram.txt"), "w") as f:
            f.write(f"{len(lines)}\n")


class OneByOne(b2luigi.BatchProcess):
    """A b2luigi batch system plugin: each task's job a background process."""

    def start_job(self):
        self._process = subprocess.Popen([str(self.job_files.wrapper)], start_new_session=True)

    def get_job_status(self):
        code = self._process.poll()
        if code is None:
            return b2luigi.JobStatus.running
        return b2luigi.JobStatus.successful if code == 0 else b2luigi.JobStatus.aborted

    def kill_job(self):
        self._process.terminate()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=2)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--broken", type=int, default=-1)
    parser.add_argument("--killed", type=int, default=-1)
    parser.add_argument("--plugin", action="store_true")
    args, _ = parser.parse_known_args()
    b2luigi.set_setting("result_dir", "results")
    if args.plugin:
        b2luigi.set_setting("batch_system", OneByOne)
    b2luigi.process(Histogram(samples=args.samples, seeds=args.seeds, broken=args.broken, killed=args.killed),
                    workers=100)
