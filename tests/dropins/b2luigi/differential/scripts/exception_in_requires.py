# requires() raises: luigi reports the task as failed to schedule.
# args:
import b2luigi


class Bad(b2luigi.Task):
    def requires(self):
        raise ZeroDivisionError("computed a bad requirement")

    def output(self):
        yield self.add_to_output("bad.txt")


if __name__ == "__main__":
    b2luigi.process(Bad())
    print("after process")
