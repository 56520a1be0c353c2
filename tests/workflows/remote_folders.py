"""A workflow whose outputs are folders under a remote result_dir (root://, davs://, dav://): Plots(i) makes a
folder of files (with a sub-folder), Index lists what its inputs hold, reading them from the server."""

import argparse
import os

import luigi

import b2batch

parser = argparse.ArgumentParser()
parser.add_argument("--result-dir", required=True)
parser.add_argument("--n", type=int, default=2)
parser.add_argument("--top-plots", type=int, default=-1, help="run only Plots(i=TOP_PLOTS)")
args, _ = parser.parse_known_args()

b2batch.set_setting("result_dir", args.result_dir)


class Plots(b2batch.Task):
    i = b2batch.IntParameter()

    def output(self):
        yield self.add_to_output("plots")

    @b2batch.on_temporary_files
    def run(self):
        folder = self.get_output_file_name("plots")
        os.makedirs(os.path.join(folder, "extra"))
        for name in ("a.txt", "b.txt", os.path.join("extra", "c.txt")):
            with open(os.path.join(folder, name), "w") as f:
                f.write(f"{self.i} {name}")


class Index(b2batch.Task):
    n = b2batch.IntParameter()

    def requires(self):
        for i in range(self.n):
            yield Plots(i=i)

    def output(self):
        yield self.add_to_output("index.txt")

    @b2batch.on_temporary_files
    def run(self):
        lines = []
        for target in luigi.task.flatten(self.input()):
            with target.get_temporary_input() as folder:
                for here, _folders, files in sorted(os.walk(folder)):
                    lines += [os.path.relpath(os.path.join(here, f), folder) for f in sorted(files)]
        with open(self.get_output_file_name("index.txt"), "w") as f:
            f.write("\n".join(lines))


if __name__ == "__main__":
    b2batch.process(Plots(i=args.top_plots) if args.top_plots >= 0 else Index(n=args.n), workers=1)
