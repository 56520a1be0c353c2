"""Slurm example: a parameter scan where each point asks Slurm for two CPUs and 500 MB.

    python examples/slurm/workflow.py --batch            # submit to the Slurm of this machine
    python examples/slurm/workflow.py --dry-run

Per-task sbatch options come from the task's `slurm_settings` (a dict of sbatch long options); settings
for all tasks from settings.json beside this file.
"""

import math

import b2batch


class ScanPoint(b2batch.Task):
    """Integrates sin(x) * x**power on [0, pi] with many steps."""

    power = b2batch.IntParameter()
    steps = b2batch.IntParameter(default=200_000)

    slurm_settings = {"cpus-per-task": 2, "mem": "500M", "time": "00:10:00"}

    def output(self):
        yield self.add_to_output("integral.txt")

    @b2batch.on_temporary_files
    def run(self):
        width = math.pi / self.steps
        total = sum(math.sin((k + 0.5) * width) * ((k + 0.5) * width) ** self.power for k in range(self.steps))
        with open(self.get_output_file_name("integral.txt"), "w") as f:
            f.write(f"{total * width}\n")


class Scan(b2batch.Task):
    """Collects the scan into one table."""

    def requires(self):
        for power in range(6):
            yield ScanPoint(power=power)

    def output(self):
        yield self.add_to_output("scan.txt")

    def run(self):
        rows = []
        for name in sorted(self.get_input_file_names("integral.txt")):
            with open(name) as f:
                rows.append(f"{name}\t{f.read().strip()}")
        with open(self.get_output_file_name("scan.txt"), "w") as f:
            f.write("\n".join(rows) + "\n")

    # The table is cheap: it runs in the steering process instead of as a job.
    run_local = True


if __name__ == "__main__":
    b2batch.process(Scan(), workers=6)
