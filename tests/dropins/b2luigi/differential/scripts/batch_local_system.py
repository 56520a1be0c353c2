# --batch with batch_system "local": b2luigi's local batch system runs the task in luigi's worker process.
# args: --batch
import b2luigi


class MyTask(b2luigi.Task):
    n = b2luigi.IntParameter()

    def output(self):
        yield self.add_to_output("out.txt")

    def run(self):
        print(f"task {self.n} prints")
        with open(self.get_output_file_name("out.txt"), "w") as f:
            f.write(f"{self.n}\n")


if __name__ == "__main__":
    b2luigi.set_setting("batch_system", "local")
    b2luigi.process([MyTask(n=1), MyTask(n=2)], workers=1)
