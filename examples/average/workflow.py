"""The main example: ten tasks each draw random numbers, one task averages them.

    python examples/average/workflow.py               # run here, one task after the other
    python examples/average/workflow.py --batch       # each task as a job (batch_system in settings.json)
    python examples/average/workflow.py --dry-run     # what would run
    python examples/average/workflow.py --show-output # every task and its files

Outputs go to results/, job logs to logs/, job files to task_files/ (beside this file).
"""

import random
import statistics

import b2batch


class RandomNumbers(b2batch.Task):
    """Draws `count` random numbers with the seed `number`."""

    number = b2batch.IntParameter()
    count = b2batch.IntParameter(default=1000)

    def output(self):
        yield self.add_to_output("numbers.txt")

    @b2batch.on_temporary_files
    def run(self):
        rng = random.Random(self.number)
        with open(self.get_output_file_name("numbers.txt"), "w") as f:
            for _ in range(self.count):
                f.write(f"{rng.random()}\n")


class Average(b2batch.Task):
    """Averages the numbers of all RandomNumbers tasks."""

    tasks = b2batch.IntParameter(default=10)

    def requires(self):
        for number in range(self.tasks):
            yield RandomNumbers(number=number)

    def output(self):
        yield self.add_to_output("average.txt")

    @b2batch.on_temporary_files
    def run(self):
        values = []
        for name in self.get_input_file_names("numbers.txt"):
            with open(name) as f:
                values.extend(float(line) for line in f)
        with open(self.get_output_file_name("average.txt"), "w") as f:
            f.write(f"{statistics.fmean(values)}\n")
        print(f"Average of {len(values)} numbers: {statistics.fmean(values):.4f}")


if __name__ == "__main__":
    b2batch.process(Average(), workers=10)
