# A failing task: luigi's summary, and process() returns (the script goes on, exit status 0).
# args:
import b2luigi


class Fine(b2luigi.Task):
    def output(self):
        yield self.add_to_output("fine.txt")

    def run(self):
        with open(self.get_output_file_name("fine.txt"), "w") as f:
            f.write("ok\n")


class Broken(b2luigi.Task):
    def requires(self):
        return Fine()

    def output(self):
        yield self.add_to_output("broken.txt")

    def run(self):
        raise KeyError("no such column")


if __name__ == "__main__":
    result = b2luigi.process(Broken())
    print("process returned:", result)
