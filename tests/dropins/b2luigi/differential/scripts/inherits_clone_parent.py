# @b2luigi.inherits gives clone_parent() (the first inherited task, cloned from this one) and clone_parents()
# (all of them, a list); keyword arguments override parameters. A dry run, then the run, then a dry run.
# args: --dry-run
# args:
# args: --dry-run
import b2luigi


class Energy(b2luigi.Task):
    energy = b2luigi.IntParameter()
    seed = b2luigi.IntParameter()

    def output(self):
        yield self.add_to_output("energy.txt")

    def run(self):
        with open(self.get_output_file_name("energy.txt"), "w") as f:
            f.write(f"{self.energy} {self.seed}\n")


class Calibration(b2luigi.Task):
    energy = b2luigi.IntParameter()

    def output(self):
        yield self.add_to_output("calibration.txt")

    def run(self):
        with open(self.get_output_file_name("calibration.txt"), "w") as f:
            f.write(f"{self.energy}\n")


@b2luigi.inherits(Energy, Calibration, without="seed")
class Merge(b2luigi.Task):
    def requires(self):
        yield self.clone_parent(seed=1)
        for parent in self.clone_parents(seed=2):
            yield parent

    def output(self):
        yield self.add_to_output("merged.txt")

    def run(self):
        print("parents:", [type(t).__name__ for t in self.clone_parents(seed=3)])
        with open(self.get_output_file_name("merged.txt"), "w") as f:
            for name in sorted(self.get_all_input_file_names()):
                f.write(open(name).read())


if __name__ == "__main__":
    b2luigi.process(Merge(energy=10), workers=1)
