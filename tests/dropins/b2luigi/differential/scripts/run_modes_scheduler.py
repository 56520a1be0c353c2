# b2luigi's run modes page: --scheduler-host and --scheduler-port name a central luigi scheduler (here one
# that no process listens on): b2luigi 1.3.0 parses them and runs with its local scheduler; b2batch asks that
# scheduler and fails (listed difference D19).
# args: --scheduler-host 127.0.0.1 --scheduler-port 9
# allowed: D19: ^run 1 \S.* (exit status: b2luigi 0, b2batch 1|stderr: (missing|extra) line|files: missing simple\.txt)
import os

with open("luigi.cfg", "w") as f:  # one try to reach the scheduler, not luigi's 3 x 30 s
    f.write("[core]\nrpc-retry-attempts = 1\nrpc-retry-wait = 1\n")
os.environ["LUIGI_CONFIG_PATH"] = os.path.abspath("luigi.cfg")

import b2luigi  # noqa: E402


class SimpleTask(b2luigi.Task):
    def output(self):
        yield self.add_to_output("simple.txt")

    def run(self):
        with open(self.get_output_file_name("simple.txt"), "w") as f:
            f.write("ran")


if __name__ == "__main__":
    b2luigi.process(SimpleTask())
