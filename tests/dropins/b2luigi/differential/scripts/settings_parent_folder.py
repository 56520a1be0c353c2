# settings.json files in the working folder and its parent: the nearest wins, the parent's fills in.
# args:
import json
import os

import b2luigi

with open(os.path.join("..", "settings.json"), "w") as f:
    json.dump({"colour": "parent", "size": "parent"}, f)
with open("settings.json", "w") as f:
    json.dump({"colour": "here"}, f)
print("colour:", b2luigi.get_setting("colour"))
print("size:", b2luigi.get_setting("size"))
os.remove(os.path.join("..", "settings.json"))
