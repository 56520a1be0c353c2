"""b2luigi's HTCondor example (its batch documentation: ten number tasks and their average, each with
htcondor_settings) through the b2luigi drop-in on the real HTCondor of tests/clusters/htcondor.sh, as the
unprivileged test user. SUMMARY is what b2luigi 1.3.0 itself printed for this script on this pool (its venv of
tests/peers/install.sh, as the test user, 2026-11-29: exit status 0, a job per task, about 4 minutes, too long to
rerun in the suite); the jobs ask HTCondor for what the tasks' htcondor_settings say."""

from __future__ import annotations

import json
import re

import pytest

from helpers.htcondor_real import TestUser, test_user  # noqa: F401 (a fixture)

# The one real pool's 2 slots: one test at a time (pytest-xdist's loadgroup; tests/helpers/tiers.py groups
# tests/systems/htcondor_real/ the same way).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group(name="htcondor-real")]

EXAMPLE = '''import random

import b2luigi


class MyNumberTask(b2luigi.Task):
    some_parameter = b2luigi.IntParameter()

    htcondor_settings = {"request_cpus": 1, "request_memory": "100 MB"}

    def output(self):
        yield self.add_to_output("output_file.txt")

    def run(self):
        print("I am now starting a task")
        random_number = random.random()

        with open(self.get_output_file_name("output_file.txt"), "w") as f:
            f.write(f"{random_number}\\n")


class MyAverageTask(b2luigi.Task):
    htcondor_settings = {"request_cpus": 1, "request_memory": "200 MB"}

    def requires(self):
        for i in range(10):
            yield self.clone(MyNumberTask, some_parameter=i)

    def output(self):
        yield self.add_to_output("average.txt")

    def run(self):
        print("I am now starting the average task")

        # Build the mean
        summed_numbers = 0
        counter = 0
        for input_file in self.get_input_file_names("output_file.txt"):
            with open(input_file, "r") as f:
                summed_numbers += float(f.read())
                counter += 1

        average = summed_numbers / counter

        with open(self.get_output_file_name("average.txt"), "w") as f:
            f.write(f"{average}\\n")


if __name__ == "__main__":
    b2luigi.set_setting("batch_system", "htcondor")
    b2luigi.process(MyAverageTask(), workers=200, batch=True)
'''

#: What b2luigi 1.3.0 prints at the end of this script on the real pool.
SUMMARY = """===== Luigi Execution Summary =====

Scheduled 11 tasks of which:
* 11 ran successfully:
    - 1 MyAverageTask()
    - 10 MyNumberTask(some_parameter=0...9)

This progress looks :) because there were no failed tasks or missing dependencies

===== Luigi Execution Summary ====="""


def test_b2luigi_htcondor_example_through_the_drop_in(test_user: TestUser) -> None:
    test_user.write(test_user.folder / "example.py", EXAMPLE)
    done = test_user.python("example.py", timeout=150)
    assert done.returncode == 0, done.stderr[-3000:]
    assert SUMMARY in done.stderr, done.stderr[-3000:]
    numbers = sorted(test_user.folder.glob("some_parameter=*/output_file.txt"))
    assert len(numbers) == 10
    average = float((test_user.folder / "average.txt").read_text())
    assert average == pytest.approx(sum(float(p.read_text()) for p in numbers) / 10)
    # The jobs ran on the pool, owned by the test user, asking for what htcondor_settings say.
    mine = f'regexp("^{test_user.folder}/", Iwd)'
    test_user.wait_queue(lambda ads: ads == [], constraint=mine)  # a completed job stays a moment in the queue
    out = test_user.condor("condor_history", "-json", "-attributes", "Owner,RequestMemory,RequestCpus,ExitCode",
                           "-constraint", mine).stdout
    asked = sorted((ad["Owner"], ad["RequestMemory"], ad["RequestCpus"], ad["ExitCode"]) for ad in json.loads(out))
    # As under b2luigi: a job per task (an array of ten, then the average's own).
    assert asked == [(test_user.name, 100, 1, 0)] * 10 + [(test_user.name, 200, 1, 0)], asked
    assert not re.search(r"\bTraceback\b", done.stderr), done.stderr[-3000:]
