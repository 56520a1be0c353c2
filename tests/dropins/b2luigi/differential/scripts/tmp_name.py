# LocalTarget.tmp_name: b2luigi's temporary name next to the target.
# args:
import os
import re

import b2luigi

target = b2luigi.LocalTarget("some/folder/file.root")
name = target.tmp_name
print("shape:", re.sub(r"\d+", "N", os.path.relpath(name)))
print("differs each time:", target.tmp_name != name)
with target.temporary_path() as path:
    print("temporary name shape:", re.sub(r"\d+", "N", os.path.basename(path)))
    with open(path, "w") as f:
        f.write("x\n")
print("moved:", target.exists())
