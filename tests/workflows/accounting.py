"""Jobs for the accounting tests: tasks that hold some memory for a while, and one that fails.

    python accounting.py --system slurm [--mb 300] [--hold 3] [--system-settings '{"mem": "600M"}']
        [--fail] [--n 1] [--shape job_per_task|pilots]

``Hold(i)`` allocates ``--mb`` MB (touching every page, so it is resident) and keeps it ``--hold`` seconds,
then burns about half a second of CPU; ``Fail`` exits 1 at once.
"""

import argparse
import json
import sys
import time

import b2batch


class Hold(b2batch.Task):
    i = b2batch.IntParameter()
    mb = b2batch.IntParameter(default=300)
    hold = b2batch.FloatParameter(default=3.0)

    def output(self):
        yield self.add_to_output("held.txt")

    def run(self):
        block = bytearray(self.mb * 1024 * 1024)
        for k in range(0, len(block), 4096):
            block[k] = 1
        time.sleep(self.hold)
        deadline = time.process_time() + 0.5
        while time.process_time() < deadline:
            pass
        with open(self.get_output_file_name("held.txt"), "w") as f:
            f.write(f"{len(block)}\n")


class Fail(b2batch.Task):
    def output(self):
        yield self.add_to_output("never.txt")

    def run(self):
        raise RuntimeError("deliberate failure")


class All(b2batch.WrapperTask):
    n = b2batch.IntParameter(default=1)
    mb = b2batch.IntParameter(default=300)
    hold = b2batch.FloatParameter(default=3.0)
    fail = b2batch.BoolParameter(default=False)

    def requires(self):
        for i in range(self.n):
            yield Hold(i=i, mb=self.mb, hold=self.hold)
        if self.fail:
            yield Fail()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--system", required=True)
    parser.add_argument("--n", type=int, default=1)
    parser.add_argument("--mb", type=int, default=300)
    parser.add_argument("--hold", type=float, default=3.0)
    parser.add_argument("--fail", action="store_true")
    parser.add_argument("--shape", default="job_per_task", help="the setting job_shape")
    parser.add_argument("--system-settings", default="{}")
    args, _ = parser.parse_known_args()
    b2batch.set_setting("batch_system", args.system)
    b2batch.set_setting(f"{args.system}_settings", json.loads(args.system_settings))
    b2batch.set_setting("poll_interval", 0.5)
    b2batch.set_setting("max_poll_interval", 1)
    b2batch.set_setting("job_shape", args.shape)
    result = b2batch.process(All(n=args.n, mb=args.mb, hold=args.hold, fail=args.fail), workers=args.n + 1,
                             batch=True, exit_on_failure=False)
    sys.exit(0 if result.scheduling_succeeded else 1)
