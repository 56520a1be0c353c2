# process(..., batch=True) in code, the batch system a task property.
# args:
# allowed: D1: ^run 1 \(no arguments\) stderr: (extra line|missing line 'INFO: (Informed scheduler that task|Done scheduling tasks|Running Worker with|Batch process \w+ running|Worker Worker\(\.\.\.\) was stopped))
import b2luigi


class MyTask(b2luigi.Task):
    @property
    def batch_system(self):
        return "test"

    def output(self):
        yield self.add_to_output("out.txt")

    def run(self):
        print("in the job")
        with open(self.get_output_file_name("out.txt"), "w") as f:
            f.write("job\n")


if __name__ == "__main__":
    b2luigi.process(MyTask(), batch=True)
