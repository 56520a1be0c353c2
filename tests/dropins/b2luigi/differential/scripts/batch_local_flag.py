# No --batch, but a task class that names its batch system: b2luigi's task attribute wins over the
# batch_system=local that a run without --batch sets.
# args:
# allowed: D1: ^run 1 \(no arguments\) stderr: (extra line|missing line 'INFO: (Informed scheduler that task|Done scheduling tasks|Running Worker with|Batch process \w+ running|Worker Worker\(\.\.\.\) was stopped))
import b2luigi


class MyTask(b2luigi.Task):
    batch_system = "test"

    def output(self):
        yield self.add_to_output("out.txt")

    def run(self):
        print("ran in the steering process")
        with open(self.get_output_file_name("out.txt"), "w") as f:
            f.write("ran\n")


if __name__ == "__main__":
    b2luigi.process(MyTask())
