# Paths of b2luigi.core.utils: log folder, serialized parameters, output file name, flatten_to_dict.
# args:
import os

import b2luigi
from b2luigi.core import utils


class MyTask(b2luigi.Task):
    a = b2luigi.IntParameter()
    b = b2luigi.ListParameter(hashed=True)

    def output(self):
        yield self.add_to_output("x.txt")


task = MyTask(a=1, b=[1, 2])
print("log dir:", os.path.relpath(utils.get_log_file_dir(task)))
print("serialized:", dict(utils.get_serialized_parameters(task)))
print("output name:", os.path.relpath(utils.create_output_file_name(task, "x.txt")))
print("flattened:", sorted(utils.flatten_to_dict([{"a": 1}, {"b": 2}]).items()))
print("mapped:", os.path.relpath(utils.map_folder("sub")))
