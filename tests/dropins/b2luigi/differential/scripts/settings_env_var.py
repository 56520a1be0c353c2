# B2LUIGI_SETTINGS_JSON names the settings file.
# env: B2LUIGI_SETTINGS_JSON={dir}/elsewhere.json
# args:
import json

import b2luigi

with open("elsewhere.json", "w") as f:
    json.dump({"result_dir": "env_results", "answer": "yes"}, f)


class MyTask(b2luigi.Task):
    def output(self):
        yield self.add_to_output("out.txt")

    def run(self):
        with open(self.get_output_file_name("out.txt"), "w") as f:
            f.write(b2luigi.get_setting("answer") + "\n")


if __name__ == "__main__":
    print("answer:", b2luigi.get_setting("answer", default="none"))
    b2luigi.process(MyTask())
