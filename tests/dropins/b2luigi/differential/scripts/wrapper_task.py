# A WrapperTask over parametrised tasks, with product_dict from b2luigi.core.utils.
# args:
import b2luigi
from b2luigi.core.utils import product_dict


class Point(b2luigi.Task):
    x = b2luigi.IntParameter()
    y = b2luigi.Parameter()

    def output(self):
        yield self.add_to_output("point.txt")

    def run(self):
        with open(self.get_output_file_name("point.txt"), "w") as f:
            f.write(f"{self.x},{self.y}\n")


class All(b2luigi.WrapperTask):
    def requires(self):
        for kwargs in product_dict(x=[1, 2], y=["a", "b"]):
            yield self.clone(Point, **kwargs)


if __name__ == "__main__":
    b2luigi.process(All(), workers=1)
