"""Three Simulate tasks whose scheduler settings are wrong: for every seed (``--all-bad``), or only for
seed 0. ``python bad_settings.py SYSTEM [--all-bad] --batch``"""

import sys

import b2batch

SYSTEM = sys.argv[1]
#: A misspelt option of each batch system's own settings.
BAD = {"htcondor": {"request_cpu": 1}, "slurm": {"cpus-per-tsk": 1}, "sge": {"nonsense_option": 1},
       "lsf": {"nonsense_option": 1}}
GOOD = {"htcondor": {"request_cpus": 1}, "slurm": {"cpus-per-task": 1}, "sge": {}, "lsf": {}}


class Simulate(b2batch.Task):
    seed = b2batch.IntParameter()
    batch_system = SYSTEM

    @property
    def settings(self):
        return BAD[SYSTEM] if self.seed == 0 or "--all-bad" in sys.argv else GOOD[SYSTEM]

    def output(self):
        yield self.add_to_output("events.txt")

    def run(self):
        with open(self.get_output_file_name("events.txt"), "w") as f:
            f.write(f"{self.seed}\n")


for system in BAD:
    setattr(Simulate, f"{system}_settings", Simulate.settings)


class All(b2batch.WrapperTask):
    def requires(self):
        for seed in range(3):
            yield Simulate(seed=seed)


if __name__ == "__main__":
    b2batch.process(All(), workers=3)
