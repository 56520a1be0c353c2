"""Tasks with long family names for the live table at 80 columns: three ReconstructionOfSimulatedEvents
tasks (each sleeps --sleep seconds), then AnalyseAllTheEvents.

    python narrow.py [--sleep S] --batch ...
"""

import argparse
import time

import b2batch

parser = argparse.ArgumentParser()
parser.add_argument("--sleep", type=float, default=0.0)
args, _unknown = parser.parse_known_args()


class ReconstructionOfSimulatedEvents(b2batch.Task):
    n = b2batch.IntParameter()

    def output(self):
        yield self.add_to_output("events.txt")

    def run(self):
        time.sleep(args.sleep)
        with open(self.get_output_file_name("events.txt"), "w") as f:
            f.write(f"{self.n}\n")


class AnalyseAllTheEvents(b2batch.Task):
    def requires(self):
        return [ReconstructionOfSimulatedEvents(n=n) for n in range(3)]

    def output(self):
        yield self.add_to_output("histogram.txt")

    def run(self):
        with open(self.get_output_file_name("histogram.txt"), "w") as f:
            f.write("3\n")


if __name__ == "__main__":
    b2batch.process(AnalyseAllTheEvents(), workers=3)
