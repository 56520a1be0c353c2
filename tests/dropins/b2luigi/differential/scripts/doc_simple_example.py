# b2luigi's quick start (simple_example): numbered tasks write a number into a LocalTarget under results/.
# args:
import b2luigi


class MyNumberTask(b2luigi.Task):
    some_parameter = b2luigi.IntParameter()

    def output(self):
        return b2luigi.LocalTarget(f"results/output_file_{self.some_parameter}.txt")

    def run(self):
        with self.output().open("w") as f:
            f.write(f"{self.some_parameter * 0.25}\n")


if __name__ == "__main__":
    b2luigi.set_setting("result_dir", "results")
    b2luigi.process([MyNumberTask(some_parameter=i) for i in range(4)], workers=1)
