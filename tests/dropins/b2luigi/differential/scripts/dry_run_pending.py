# --dry-run lists per class the tasks that would run and calls their dry_run().
# args: --dry-run
import b2luigi


class Leaf(b2luigi.Task):
    n = b2luigi.IntParameter()

    def output(self):
        yield self.add_to_output("leaf.txt")

    def dry_run(self):
        print(f"   leaf {self.n} would write", "leaf.txt")


class Top(b2luigi.Task):
    def requires(self):
        yield Leaf(n=1)

    def output(self):
        yield self.add_to_output("top.txt")


if __name__ == "__main__":
    b2luigi.process(Top())
