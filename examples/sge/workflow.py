"""Sun Grid Engine example: word counts of generated texts, each counting job with 2 slots and a time limit.

    python examples/sge/workflow.py --batch     # submit to the Grid Engine of this machine
"""

import collections
import random

import b2batch

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa".split()


class CountWords(b2batch.Task):
    seed = b2batch.IntParameter()

    sge_settings = {"pe": "smp 2", "resources": {"h_rt": "00:10:00"}}

    def output(self):
        yield self.add_to_output("counts.txt")

    @b2batch.on_temporary_files
    def run(self):
        rng = random.Random(self.seed)
        counts = collections.Counter(rng.choice(WORDS) for _ in range(100_000))
        with open(self.get_output_file_name("counts.txt"), "w") as f:
            for word, count in sorted(counts.items()):
                f.write(f"{word} {count}\n")


class Total(b2batch.Task):
    def requires(self):
        for seed in range(4):
            yield CountWords(seed=seed)

    def output(self):
        yield self.add_to_output("total.txt")

    def run(self):
        total = collections.Counter()
        for name in self.get_input_file_names("counts.txt"):
            with open(name) as f:
                for line in f:
                    word, count = line.split()
                    total[word] += int(count)
        with open(self.get_output_file_name("total.txt"), "w") as f:
            f.write("".join(f"{w} {c}\n" for w, c in sorted(total.items())))


if __name__ == "__main__":
    b2batch.process(Total(), workers=4)
