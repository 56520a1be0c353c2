"""The starter files ``b2luigi init`` writes: ``tasks.py`` (one task with one parameter) and
``parameters.py`` (its ``config``)."""

TASKS_TEMPLATE = '''\
import b2luigi


class MyTask(b2luigi.Task):
    """A first task: writes its parameter into output.txt. Run it with: b2luigi run MyTask"""

    parameter = b2luigi.Parameter()

    def run(self):
        with open(self.get_output_file_name("output.txt"), "w") as f:
            f.write(f"{self.parameter}")

    def output(self):
        yield self.add_to_output("output.txt")

'''

PARAMS_TEMPLATE = '''\
# The task parameters for 'b2luigi run': a dict named 'config', one entry per parameter name.
# ParameterGenerator([...]) as a value runs the task once per value.
config = {"parameter": "1"}
'''
