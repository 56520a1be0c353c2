"""A task of __main__ that requires a task of the module next to the script, both run as jobs."""

import json
import os

from batch_module import ModuleTask

import b2batch


class MainTask(b2batch.Task):
    def requires(self):
        return [ModuleTask(n=1), ModuleTask(n=2)]

    def output(self):
        yield self.add_to_output("main.json")

    def run(self):
        with open(self.get_output_file_name("main.json"), "w") as f:
            json.dump({"pid": os.getpid(), "cwd": os.getcwd(), "module": __name__,
                       "inputs": self.get_input_file_names("module.json")}, f)


if __name__ == "__main__":
    print(f"steering pid {os.getpid()}", flush=True)
    b2batch.process(MainTask(), batch=True, batch_system="local", workers=2)
