# b2luigi.core.utils' docstrings: product_dict() gives every combination of keyword values, to require one
# task per combination; fill_kwargs_with_lists() makes each value a list.
# args:
import b2luigi
from b2luigi.core.utils import fill_kwargs_with_lists, product_dict


class Cell(b2luigi.Task):
    arg_1 = b2luigi.IntParameter()
    arg_2 = b2luigi.IntParameter()

    def output(self):
        yield self.add_to_output("cell.txt")

    def run(self):
        with open(self.get_output_file_name("cell.txt"), "w") as f:
            f.write(str(self.arg_1 * self.arg_2))


class Grid(b2luigi.WrapperTask):
    def requires(self):
        for args in product_dict(**fill_kwargs_with_lists(arg_1=[1, 2], arg_2=3)):
            yield Cell(**args)


if __name__ == "__main__":
    print(list(product_dict(arg_1=[1, 2], arg_2=[3, 4])))
    print(fill_kwargs_with_lists(arg_1=[1, 2], arg_2=3, arg_3=None, arg_4="text"))
    b2luigi.process(Grid())
