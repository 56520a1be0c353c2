# A settings.json in the script's folder, written before the run, chooses result_dir.
# args:
import json

import b2luigi

with open("settings.json", "w") as f:
    json.dump({"result_dir": "from_json", "my_value": 7}, f)


class MyTask(b2luigi.Task):
    n = b2luigi.IntParameter()

    def output(self):
        yield self.add_to_output("out.txt")

    def run(self):
        with open(self.get_output_file_name("out.txt"), "w") as f:
            f.write(f"{b2luigi.get_setting('my_value')}\n")


if __name__ == "__main__":
    print("my_value:", b2luigi.get_setting("my_value"))
    b2luigi.process(MyTask(n=1))
