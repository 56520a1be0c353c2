"""Prints (JSON) the Slurm script and HTCondor submit lines b2luigi's process classes write for a task, as
b2luigi's own tests make them (a stand-in process whose task puts its files into one folder, named <DIR> in the
output). Runs unchanged under b2luigi 1.3.0 and through the shim (tests/dropins/b2luigi/test_b2luigi_batch.py compares them)."""

import json
import os
import sys
import tempfile
from unittest import mock

import b2luigi
from b2luigi.batch.processes.htcondor import HTCondorProcess
from b2luigi.batch.processes.slurm import SlurmProcess


class Job(b2luigi.Task):
    sample = b2luigi.Parameter()

    def output(self):
        yield self.add_to_output("out.txt")

    def run(self):
        pass


def main():
    folder = os.path.realpath(tempfile.mkdtemp())
    b2luigi.set_setting("result_dir", os.path.join(folder, "results"))
    for key, value in json.loads(sys.argv[1]).items():
        b2luigi.set_setting(key, value)
    task = Job(sample="a")
    task.get_task_file_dir = lambda: folder
    task.get_log_file_dir = lambda: folder
    process = mock.Mock(task=task)
    answer = {}
    try:
        SlurmProcess._create_slurm_submit_file(process)
        with open(os.path.join(folder, "slurm_parameters.sh")) as script:
            answer["slurm"] = script.read().replace(folder, "<DIR>")
    except Exception as e:
        answer["slurm"] = type(e).__name__
    try:
        answer["htcondor"] = [line.replace(folder, "<DIR>") for line in HTCondorProcess._create_submit_file_content(task)]
    except Exception as e:
        answer["htcondor"] = type(e).__name__
    print(json.dumps(answer))


if __name__ == "__main__":
    main()
