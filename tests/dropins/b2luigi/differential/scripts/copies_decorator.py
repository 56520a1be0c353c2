# luigi's @copies through b2luigi: a task that copies another task's output.
# args:
import b2luigi


class Source(b2luigi.Task):
    def output(self):
        return b2luigi.LocalTarget("source.txt")

    def run(self):
        with self.output().open("w") as f:
            f.write("copied text\n")


@b2luigi.copies(Source)
class Copy(b2luigi.Task):
    def output(self):
        return b2luigi.LocalTarget("copy.txt")


if __name__ == "__main__":
    b2luigi.process(Copy(), workers=1)
