# A setting as a task attribute and as a property wins over set_setting.
# args:
import b2luigi


class Fixed(b2luigi.Task):
    result_dir = "attribute_results"

    def output(self):
        yield self.add_to_output("a.txt")

    def run(self):
        with open(self.get_output_file_name("a.txt"), "w") as f:
            f.write(f"{b2luigi.get_setting('result_dir', task=self)}\n")


class ByProperty(b2luigi.Task):
    n = b2luigi.IntParameter()

    @property
    def result_dir(self):
        return f"property_results_{self.n}"

    def requires(self):
        return Fixed()

    def output(self):
        yield self.add_to_output("b.txt")

    def run(self):
        with open(self.get_output_file_name("b.txt"), "w") as f:
            f.write(f"{b2luigi.get_setting('result_dir', task=self)}\n")


if __name__ == "__main__":
    b2luigi.set_setting("result_dir", "code_results")
    print("global:", b2luigi.get_setting("result_dir"))
    b2luigi.process(ByProperty(n=2), workers=1)
