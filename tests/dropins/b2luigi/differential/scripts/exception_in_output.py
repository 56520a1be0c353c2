# output() raises while luigi checks completeness.
# args:
import b2luigi


class Bad(b2luigi.Task):
    def output(self):
        raise TypeError("no output for you")

    def run(self):
        pass


if __name__ == "__main__":
    b2luigi.process(Bad())
    print("after process")
