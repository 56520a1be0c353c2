# A value luigi cannot parse for an IntParameter, given on the command line of a luigi-style parse.
# args:
import b2luigi


class MyTask(b2luigi.Task):
    n = b2luigi.IntParameter()

    def output(self):
        yield self.add_to_output("out.txt")


if __name__ == "__main__":
    try:
        MyTask(n="abc")
        print("constructed")
    except Exception as error:
        print("error type:", type(error).__name__)
    try:
        MyTask()
    except Exception as error:
        print("missing:", type(error).__name__)
    print(MyTask.n.parse("12") + 1)
    MyTask.n.parse("twelve")
