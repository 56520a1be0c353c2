# A setting with no value and no default raises b2luigi's exception type; the script catches it by type.
# args:
import b2luigi


class MyTask(b2luigi.Task):
    pass


try:
    b2luigi.get_setting("no_such_setting")
except ValueError as error:
    print("module level:", type(error).__name__)
try:
    b2luigi.get_setting("no_such_setting", task=MyTask())
except ValueError as error:
    print("with task:", type(error).__name__)
print("default:", b2luigi.get_setting("no_such_setting", default=3, task=MyTask()))
