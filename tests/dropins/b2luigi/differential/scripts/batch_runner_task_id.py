# b2luigi's batch worker: `python script.py --batch-runner --task-id <id>` runs only that task of the graph
# (here, no scheduler, requirements not checked); an unknown id and a failing task end with a traceback.
# args: --batch-runner --task-id Part_1_f4fe3360f0
# args: --batch-runner --task-id Total_False_009d7664d3
# args: --batch-runner --task-id Part_2_fbe666d9fe
# args: --batch-runner --task-id Total_False_009d7664d3
# args: --batch-runner --task-id Part_7_nosuchtask0
# args: --batch-runner --task-id Part__1_d37d5a87d0
# args: --batch-runner
import b2luigi


class Part(b2luigi.Task):
    n = b2luigi.IntParameter()

    def output(self):
        yield self.add_to_output("part.txt")

    def run(self):
        print(f"running part {self.n}")
        if self.n < 0:
            raise RuntimeError("a failing part")
        with open(self.get_output_file_name("part.txt"), "w") as f:
            f.write(f"{self.n}\n")


class Total(b2luigi.Task):
    fail = b2luigi.BoolParameter(default=False)

    def requires(self):
        yield Part(n=1)
        yield Part(n=2)

    def output(self):
        yield self.add_to_output("total.txt")

    def run(self):
        print("running total")
        total = sum(int(open(path).read()) for path in self.get_input_file_names("part.txt"))
        with open(self.get_output_file_name("total.txt"), "w") as f:
            f.write(f"{total}\n")


if __name__ == "__main__":
    b2luigi.set_setting("result_dir", "results")
    b2luigi.process([Total(), Part(n=-1)])
    print("process returned")
