# set_setting, get_setting with and without default, clear_setting.
# args:
import b2luigi

b2luigi.set_setting("my_key", [1, 2])
print("set:", b2luigi.get_setting("my_key"))
b2luigi.set_setting("my_key", {"a": 1})
print("again:", b2luigi.get_setting("my_key"))
b2luigi.clear_setting("my_key")
print("cleared:", b2luigi.get_setting("my_key", default="fallback"))
print("none default:", b2luigi.get_setting("my_key", None))
try:
    b2luigi.clear_setting("never_set")
    print("clear of unset: fine")
except Exception as error:
    print("clear of unset:", type(error).__name__)
