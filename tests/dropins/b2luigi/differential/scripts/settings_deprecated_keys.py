# get_setting(..., deprecated_keys=[...]) from the top-level name and from b2luigi.core.settings.
# args:
import warnings

import b2luigi
from b2luigi.core.settings import get_setting

b2luigi.set_setting("old_name", "old value")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    print("top level:", b2luigi.get_setting("new_name", "dflt", deprecated_keys=["old_name"]))
    print("core:", get_setting("new_name", default="dflt", deprecated_keys=["old_name"]))
    print("warned:", sorted({type(w.message).__name__ for w in caught}), len(caught) > 0)
b2luigi.set_setting("new_name", "new value")
print("new wins:", b2luigi.get_setting("new_name", "dflt", deprecated_keys=["old_name"]))
