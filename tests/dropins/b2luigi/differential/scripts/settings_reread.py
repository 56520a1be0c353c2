# settings.json changed while the process runs: b2luigi reads the file at each lookup.
# args:
import json
import os

import b2luigi

print("before file:", b2luigi.get_setting("colour", default="none"))
with open("settings.json", "w") as f:
    json.dump({"colour": "red"}, f)
print("after write:", b2luigi.get_setting("colour", default="none"))
with open("settings.json", "w") as f:
    json.dump({"colour": "blue"}, f)
print("after change:", b2luigi.get_setting("colour", default="none"))
os.remove("settings.json")
print("after removal:", b2luigi.get_setting("colour", default="none"))
