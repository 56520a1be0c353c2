# A task that fails in a "test" batch job: the run ends, the script goes on after process().
# args: --batch
import b2luigi


class Broken(b2luigi.Task):
    batch_system = "test"

    def output(self):
        yield self.add_to_output("never.txt")

    def run(self):
        raise ValueError("bad input in the job")


if __name__ == "__main__":
    b2luigi.process(Broken())
    print("after process")
