# luigi's own names through b2luigi: luigi.Task subclasses, luigi targets and events in a b2luigi workflow.
# args:
import b2luigi


class Plain(b2luigi.Task):
    def output(self):
        return b2luigi.LocalTarget("plain.txt")

    def run(self):
        with self.output().open("w") as f:
            f.write("plain\n")


@Plain.event_handler(b2luigi.Event.SUCCESS)
def celebrate(task):
    print("success of", task)


if __name__ == "__main__":
    b2luigi.process(Plain())
