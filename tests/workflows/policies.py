"""Self-healing policies (docs/policies.md): a poison task, a failure budget, a task that checkpoints.

``--mode poison``: ``Poison`` always fails, ``Fine`` succeeds. ``--mode acceptance``: ``Merge`` (acceptance
0.95) needs 20 ``Part`` tasks, of which part 7 always fails; it writes the inputs it got and what it went
without. ``--mode checkpoint --steps N``: ``Count`` counts to N, one step a second (``--step-seconds``), with a
checkpoint after every step; its first job sends the warning signal (``--warn-signal``, default SIGUSR1) to its
own job wrapper after 3 steps, unless ``--no-self-warning`` (then the batch system's time limit warns it).
``--warn-at-start``: the first job is warned once b2batch set its handler, before ``run()`` began (in the task's
``START`` event, as Slurm's early warning can come).
Every step is appended to ``steps.txt`` with the job's attempt: resumed jobs go on where the checkpoint was.
"""

import argparse
import os
import signal
import time

import b2batch

parser = argparse.ArgumentParser()
parser.add_argument("--mode", default="poison")
parser.add_argument("--steps", type=int, default=8)
parser.add_argument("--step-seconds", type=float, default=0.2)
parser.add_argument("--warn-signal", default="SIGUSR1")
parser.add_argument("--no-self-warning", action="store_true")
parser.add_argument("--warn-at-start", action="store_true")
args, _rest = parser.parse_known_args()


class Poison(b2batch.Task):
    def output(self):
        yield self.add_to_output("poison.txt")

    def run(self):
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "poison-starts.txt"), "a") as f:
            f.write("started\n")
        raise ValueError("this input is broken for good")


class Fine(b2batch.Task):
    def output(self):
        yield self.add_to_output("fine.txt")

    def run(self):
        with open(self.get_output_file_name("fine.txt"), "w") as f:
            f.write("fine\n")


class Part(b2batch.Task):
    number = b2batch.IntParameter()

    def output(self):
        yield self.add_to_output("part.txt")

    def run(self):
        if self.number == 7:
            raise ValueError(f"part {self.number} has a bad input")
        with open(self.get_output_file_name("part.txt"), "w") as f:
            f.write(f"{self.number}\n")


class Merge(b2batch.Task):
    acceptance = 0.95

    def requires(self):
        for number in range(20):
            yield Part(number=number)

    def output(self):
        yield self.add_to_output("merged.txt")

    def run(self):
        got = sorted(int(open(path).read()) for path in self.get_input_file_names("part.txt"))
        without = sorted(task.number for task in self.missing_requirements())
        with open(self.get_output_file_name("merged.txt"), "w") as f:
            f.write(f"got {got}\nwithout {without}\n")


class Count(b2batch.Task):
    steps = b2batch.IntParameter()

    def output(self):
        yield self.add_to_output("count.txt")

    def checkpoint(self):
        # Called on the batch system's warning, between two steps of run(): keep where the count is.
        temporary = self.checkpoint_path.with_name("checkpoint.tmp")
        temporary.write_text(str(self.done))
        os.replace(temporary, self.checkpoint_path)

    def run(self):
        resumed = self.checkpoint_path.exists()
        self.done = int(self.checkpoint_path.read_text()) if resumed else 0
        attempt = "resumed" if resumed else "first"
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "steps.txt"), "a") as log:
            log.write(f"{attempt} start {self.done}\n")
            log.flush()
            while self.done < self.steps:
                time.sleep(args.step_seconds)
                self.done += 1
                log.write(f"{attempt} step {self.done}\n")
                log.flush()
                if not resumed and self.done == 3 and not args.no_self_warning:
                    os.kill(os.getppid(), getattr(signal, args.warn_signal))  # the job's wrapper
        with open(self.get_output_file_name("count.txt"), "w") as f:
            f.write(f"{self.done}\n")


@Count.event_handler(b2batch.Event.START)
def warn_at_start(task):
    marker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "warned-at-start")
    steering = os.environ.get("POLICIES_STEERING_PID") == str(os.getpid())  # (START fires in the task's job)
    if args.warn_at_start and not steering and not os.path.exists(marker):
        open(marker, "w").close()
        os.kill(os.getppid(), signal.SIGUSR1)  # the job's wrapper passes it on
        time.sleep(10)


if __name__ == "__main__":
    os.environ.setdefault("POLICIES_STEERING_PID", str(os.getpid()))
    roots = {"poison": [Poison(), Fine()], "acceptance": [Merge()], "checkpoint": [Count(steps=args.steps)]}
    b2batch.process(roots[args.mode], workers=20)
