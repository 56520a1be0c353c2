"""A b2luigi workflow using b2luigi's module paths, parameter options and settings (run with the shim)."""

import sys

import b2luigi
from b2luigi.core.utils import create_output_file_name, get_serialized_parameters, product_dict


class Simulate(b2luigi.Task):
    energy = b2luigi.IntParameter()
    files = b2luigi.ListParameter(hashed=True, hash_function=lambda files: f"{len(files)}files")

    def output(self):
        yield self.add_to_output("sim.txt")

    def dry_run(self):
        print(f"would write {create_output_file_name(self, 'sim.txt')}")

    @b2luigi.on_temporary_files
    def run(self):
        with open(self.get_output_file_name("sim.txt"), "w") as f:
            f.write(f"{dict(get_serialized_parameters(self))}")
            if "--fail" in sys.argv:
                raise RuntimeError("simulation broke half way")


class Summary(b2luigi.Task):
    def requires(self):
        for kwargs in product_dict(energy=[1, 2], files=[("a.root", "b.root")]):
            yield Simulate(**kwargs)

    def output(self):
        yield self.add_to_output("summary.txt")

    def run(self):
        with open(self.get_output_file_name("summary.txt"), "w") as f:
            f.write("\n".join(sorted(self.get_input_file_names("sim.txt"))))


if __name__ == "__main__":
    # b2luigi's: returns (exit status 0) when a task failed; --fail is the script's own flag
    b2luigi.process(Summary(), ignore_additional_command_line_args=True)
