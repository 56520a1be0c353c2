"""Tasks in an importable module next to the workflow script (not __main__)."""

import json
import os

import b2batch


class ModuleTask(b2batch.Task):
    n = b2batch.IntParameter()

    def output(self):
        yield self.add_to_output("module.json")

    def run(self):
        with open(self.get_output_file_name("module.json"), "w") as f:
            json.dump({"pid": os.getpid(), "cwd": os.getcwd(), "module": __name__}, f)
