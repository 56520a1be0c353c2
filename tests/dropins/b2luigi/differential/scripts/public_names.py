# b2luigi's public names (and luigi's, re-exported) are there with their kinds.
# args:
import inspect

import b2luigi

NAMES = ["Task", "ExternalTask", "WrapperTask", "DispatchableTask", "LocalTarget", "Parameter", "IntParameter",
         "FloatParameter", "BoolParameter", "ListParameter", "DictParameter", "DateParameter", "TupleParameter",
         "ChoiceParameter", "OptionalParameter", "BatchIntParameter", "Event", "Target", "on_temporary_files",
         "dispatch", "requires", "inherits", "copies", "get_setting", "set_setting", "clear_setting",
         "process", "build", "wrap_parameter", "ParameterGenerator", "ZippedParameterGenerator", "RemoteTarget",
         "XRootDSystem", "XRootDTarget", "WebDAVSystem", "WebDAVTarget", "run", "notifications"]
for name in NAMES:
    value = getattr(b2luigi, name, None)
    kind = "missing" if value is None else ("class" if inspect.isclass(value) else
                                            "module" if inspect.ismodule(value) else "callable" if callable(value)
                                            else "other")
    print(f"{name}: {kind}")
print("Task is luigi Task:", issubclass(b2luigi.Task, __import__("luigi").Task))
print("LocalTarget is luigi's:", issubclass(b2luigi.LocalTarget, __import__("luigi").LocalTarget))
