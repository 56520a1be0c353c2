# b2luigi's module paths that user code imports from.
# args:
import importlib

import b2luigi  # noqa: F401  (the package itself first, as user code does)

for module, names in [
    ("b2luigi.core.utils", ["product_dict", "flatten_to_dict", "get_serialized_parameters", "map_folder",
                            "get_log_file_dir", "get_task_file_dir", "create_output_file_name"]),
    ("b2luigi.core.settings", ["get_setting", "set_setting", "clear_setting", "DeprecatedSettingsWarning"]),
    ("b2luigi.core.task", ["Task", "ExternalTask", "WrapperTask"]),
    ("b2luigi.core.target", ["LocalTarget", "FileSystemTarget"]),
    ("b2luigi.core.temporary_wrapper", ["on_temporary_files"]),
    ("b2luigi.core.dispatchable_task", ["dispatch", "DispatchableTask"]),
    ("b2luigi.core.executable", ["create_executable_wrapper"]),
    ("b2luigi.batch.processes", ["BatchProcess", "JobStatus"]),
    ("b2luigi.batch.processes.test", ["TestProcess"]),
    ("b2luigi.batch.workers", ["BatchSystems"]),
    ("b2luigi.cli.process", ["process"]),
]:
    loaded = importlib.import_module(module)
    print(module, [name for name in names if not hasattr(loaded, name)] or "all there")
from b2luigi.batch.processes import JobStatus
print(sorted(status.name for status in JobStatus))
from b2luigi.batch.workers import BatchSystems
print(sorted(system.value for system in BatchSystems))
