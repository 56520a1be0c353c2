"""A workflow written for b2luigi, run with b2batch in its place."""

import b2batch as b2luigi


class Simulate(b2luigi.Task):
    energy = b2luigi.IntParameter()
    seed = b2luigi.IntParameter()
    tag = "from-settings"  # a task attribute read with get_setting

    def output(self):
        yield self.add_to_output("sim.txt")

    @b2luigi.on_temporary_files
    def run(self):
        with open(self.get_output_file_name("sim.txt"), "w") as f:
            f.write(f"{self.energy} {self.seed} {b2luigi.get_setting('tag', task=self)}")


@b2luigi.inherits(Simulate, without="seed")
class Reconstruct(b2luigi.Task):
    def requires(self):
        for seed in (1, 2):
            yield self.clone(Simulate, seed=seed)

    def output(self):
        yield self.add_to_output("reco.txt")

    def run(self):
        lines = []
        for name in self.get_input_file_names("sim.txt"):
            with open(name) as f:
                lines.append(f.read().rsplit(" ", 1)[0])
        with open(self.get_output_file_name("reco.txt"), "w") as f:
            f.write("\n".join(lines))


@b2luigi.requires(Reconstruct, energy=10)
class Summary(b2luigi.Task):
    def output(self):
        yield self.add_to_output("summary.txt")

    def run(self):
        inputs = list(self.get_all_input_file_names())
        with open(self.get_output_file_name("summary.txt"), "w") as f:
            f.write(f"{len(self.get_input_file_names('reco.txt')) + 1} inputs" if inputs else "none")


if __name__ == "__main__":
    b2luigi.set_setting("result_dir", "results")
    b2luigi.process(Summary(), workers=2)
