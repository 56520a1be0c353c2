# Parameter grouping (b2luigi's grouping example) with --batch on batch_system "local": b2luigi 1.3.0 stops
# with a RuntimeError (grouping only on HTCondor, Slurm and LSF), exit status 1, nothing written; b2batch runs
# the 21 tasks (listed difference D15).
# args: --batch
# allowed: D15: ^run 1 \(--batch\) (exit status|stderr|files: extra (seed=\d+/sim\.txt|all\.txt))
import b2luigi


class Simulate(b2luigi.Task):
    seed = b2luigi.IntParameter(grouping=True)
    max_grouping_size = 5

    def output(self):
        yield self.add_to_output("sim.txt")

    def run(self):
        with open(self.get_output_file_name("sim.txt"), "w") as f:
            f.write(f"{self.seed}\n")


class Collect(b2luigi.Task):
    def requires(self):
        for seed in range(20):
            yield Simulate(seed=seed)

    def output(self):
        yield self.add_to_output("all.txt")

    def run(self):
        with open(self.get_output_file_name("all.txt"), "w") as f:
            f.write(f"{len(self.get_input_file_names('sim.txt'))}\n")


if __name__ == "__main__":
    b2luigi.set_setting("batch_system", "local")
    b2luigi.process(Collect(), workers=4)
