# get_setting("batch_system") in run() of a run without --batch: b2luigi's process() sets it to "local". A
# task with a batch_system of its own runs as a job of it, where only the script's own settings are seen.
# args:
# allowed: D1: run 1 \(no arguments\) stderr: extra line 'INFO: (Job \d+\.\d+: submitted task Own\(\) to test|Own on test: job_per_task)
import b2luigi


class Plain(b2luigi.Task):
    def output(self):
        yield self.add_to_output("plain.txt")

    def run(self):
        print("plain:", b2luigi.get_setting("batch_system", default="<none>"),
              b2luigi.get_setting("batch_system", task=self, default="<none>"))
        with open(self.get_output_file_name("plain.txt"), "w") as f:
            f.write(b2luigi.get_setting("batch_system") + "\n")


class Own(b2luigi.Task):
    batch_system = "test"

    def requires(self):
        yield Plain()

    def output(self):
        yield self.add_to_output("own.txt")

    def run(self):
        print("own:", b2luigi.get_setting("batch_system", default="<none>"),
              b2luigi.get_setting("batch_system", task=self, default="<none>"))
        with open(self.get_output_file_name("own.txt"), "w") as f:
            f.write(b2luigi.get_setting("batch_system", task=self) + "\n")


if __name__ == "__main__":
    print("before:", b2luigi.get_setting("batch_system", default="<none>"))
    b2luigi.process(Own(), workers=1)
