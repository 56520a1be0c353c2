# @b2luigi.inherits with without=: the parameters a task takes from another.
# args:
import b2luigi


class Source(b2luigi.Task):
    energy = b2luigi.IntParameter()
    run_number = b2luigi.IntParameter()

    def output(self):
        yield self.add_to_output("source.txt")

    def run(self):
        with open(self.get_output_file_name("source.txt"), "w") as f:
            f.write(f"{self.energy} {self.run_number}\n")


@b2luigi.inherits(Source, without="run_number")
class Merge(b2luigi.Task):
    def requires(self):
        for run_number in range(2):
            yield self.clone(Source, run_number=run_number)

    def output(self):
        yield self.add_to_output("merged.txt")

    def run(self):
        parts = []
        for name in sorted(self.get_input_file_names("source.txt")):
            with open(name) as f:
                parts.append(f.read().strip())
        with open(self.get_output_file_name("merged.txt"), "w") as f:
            f.write("|".join(parts) + "\n")


if __name__ == "__main__":
    print(sorted(name for name, _ in Merge.get_params()))
    b2luigi.process(Merge(energy=10), workers=1)
