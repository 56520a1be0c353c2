# b2luigi.core helpers that code written against b2luigi calls: is_subdir, get_filename, map_folder, the
# worker command (create_cmd_from_task, its quoting), the apptainer argv, serialize_hashed, _no_value, the
# settings files, EnsuredTemporaryScratchDirectory and on_temporary_files' keyword-only options.
# args:
import os
import shlex
import sys

import b2luigi
from b2luigi.core import settings, temporary_wrapper, utils


class MyTask(b2luigi.Task):
    a = b2luigi.IntParameter()
    text = b2luigi.Parameter()
    h = b2luigi.ListParameter(hashed=True)


def shown(words):
    return [("<python>" if w == sys.executable else os.path.relpath(w) if os.path.isabs(w) else w) for w in words]


task = MyTask(a=1, text="it's $HOME; touch x", h=[1, 2])
print("is_subdir:", utils.is_subdir("a/b", "a"), utils.is_subdir("a", "a/b"), utils.is_subdir("a", "a"))
print("filename:", os.path.relpath(utils.get_filename()))
print("mapped:", os.path.relpath(utils.map_folder("sub")), utils.map_folder("/abs/x"))
command = utils.create_cmd_from_task(task)
print("command:", shown(command))
print("split back:", shown(shlex.split(" ".join(command))))
b2luigi.set_setting("executable", ["python3", "-u"])
b2luigi.set_setting("task_cmd_additional_args", ["--extra"])
print("command with settings:", shown(utils.create_cmd_from_task(task)))
b2luigi.set_setting("task_cmd_additional_args", "--extra")
try:
    utils.create_cmd_from_task(task)
except ValueError as e:
    print("a string for a list:", type(e).__name__)
b2luigi.clear_setting("task_cmd_additional_args")
b2luigi.clear_setting("executable")
b2luigi.set_setting("env_script", "setup.sh")  # (a path with spaces: b2batch quotes it, b2luigi does not)
b2luigi.set_setting("apptainer_image", "/images/a.sif")
b2luigi.set_setting("apptainer_cmd", "apptainer")
b2luigi.set_setting("apptainer_mounts", ["/data"])
print("apptainer:", shown(utils.create_apptainer_command("echo hi", task=task)))
print("serialize_hashed:", hasattr(MyTask.h, "serialize_hashed"), hasattr(MyTask.a, "serialize_hashed"))
print("no value:", settings._no_value is not None)
print("settings files:", [os.path.relpath(f) for f in settings._setting_file_iterator()])
with temporary_wrapper.EnsuredTemporaryScratchDirectory(dir="scratch/deeper") as folder:
    print("scratch:", os.path.relpath(os.path.dirname(folder)), os.path.isdir(folder))
try:
    b2luigi.on_temporary_files(False)
except TypeError as e:
    print("positional option:", type(e).__name__)
