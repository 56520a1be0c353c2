# on_temporary_files reads inputs from copies under scratch_dir (made when first asked for, removed at the
# end), b2luigi 1.3's layout of the answers (get_all_input_file_names: a list per key, from_dict: a list),
# inputs=False reads them in place, and a failing run leaves neither copies nor outputs.
# args:
import os

import b2luigi

b2luigi.set_setting("scratch_dir", "scratch")
b2luigi.set_setting("result_dir", "results")
copies = {}


def where(path):
    return os.path.relpath(os.path.dirname(os.path.dirname(os.path.abspath(path)))), os.path.basename(path)


class Producer(b2luigi.Task):
    name = b2luigi.Parameter()

    def output(self):
        yield self.add_to_output("input.txt")
        yield self.add_to_output("other.txt")

    def run(self):
        for key in ("input.txt", "other.txt"):
            with open(self.get_output_file_name(key), "w") as f:
                f.write(f"{key} of {self.name}\n")


class Consumer(b2luigi.Task):
    def requires(self):
        return [Producer(name="a"), Producer(name="b")]

    def output(self):
        yield self.add_to_output(f"{type(self).__name__}.txt")

    @b2luigi.on_temporary_files
    def run(self):
        real = [os.path.relpath(p) for p in b2luigi.Task.get_input_file_names(self, "input.txt")]
        seen = self.get_input_file_names("input.txt")
        print("inputs:", [where(p) for p in seen], "real:", real)
        print("contents:", [open(p).read().strip() for p in seen])
        print("again the same copies:", self.get_input_file_names("input.txt") == seen)
        print("one input:", where(self.get_input_file_name("input.txt")) if len(seen) == 1 else "two")
        everything = self.get_all_input_file_names()
        print("all inputs:", type(everything).__name__, [[where(p) for p in x] for x in everything])
        copies["consumer"] = seen
        with open(self.get_output_file_name(f"{type(self).__name__}.txt"), "w") as f:
            f.write("done\n")


class DictConsumer(b2luigi.Task):
    def requires(self):
        return {"first": Producer(name="a"), "second": Producer(name="b")}

    def output(self):
        yield self.add_to_output("dict.txt")

    @b2luigi.on_temporary_files
    def run(self):
        one = self.get_input_file_names_from_dict("first", "other.txt")
        print("from dict:", [where(p) for p in one], [open(p).read().strip() for p in one])
        print("whole requirement:", sorted(where(p)[1].split("-")[0] for p in
                                           self.get_input_file_names_from_dict("second")))
        with open(self.get_output_file_name("dict.txt"), "w") as f:
            f.write("done\n")


class InPlace(Consumer):
    @b2luigi.on_temporary_files(inputs=False)
    def run(self):
        print("inputs in place:", [os.path.relpath(p) for p in self.get_input_file_names("input.txt")])
        print("all in place:", sorted(os.path.relpath(p) for p in self.get_all_input_file_names()))
        with open(self.get_output_file_name(f"{type(self).__name__}.txt"), "w") as f:
            f.write("done\n")


class Failing(Consumer):
    @b2luigi.on_temporary_files
    def run(self):
        copies["failing"] = list(self.get_input_file_names("other.txt"))
        with open(self.get_output_file_name(f"{type(self).__name__}.txt"), "w") as f:
            f.write("half\n")
        raise ValueError("fails after reading")


if __name__ == "__main__":
    b2luigi.process([Consumer(), DictConsumer(), InPlace(), Failing()], workers=1)
    print("copies left:", {name: [os.path.exists(p) for p in paths] for name, paths in copies.items()})
    print("scratch left:", sorted(os.listdir("scratch")))
