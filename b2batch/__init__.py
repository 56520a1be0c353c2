"""b2batch: run a luigi workflow locally or as jobs on HTCondor, LSF, Slurm, Sun Grid Engine or locally.

Everything of luigi's public API is available here too, so ``import b2batch as luigi`` (or ``as b2luigi``)
works; b2batch's own task classes, parameters and helpers replace luigi's of the same name.
"""

from luigi import *  # noqa: F401,F403  (b2batch offers luigi's public API)
from luigi import __all__ as _luigi_all

from b2batch.errors import B2BatchError, BatchSystemError, OutputPathError, SchedulerCommandError, SettingError
from b2batch.process import BatchProcess, JobStatus
from b2batch.workflow import process
from b2batch.settings import clear_setting, get_setting, set_setting
from b2batch.task import (
    PARAMETER_CLASSES,
    ExternalTask,
    LocalTarget,
    Task,
    WrapperTask,
    inherits,
    on_temporary_files,
    requires,
)

globals().update(PARAMETER_CLASSES)

# b2luigi's names beyond luigi's and the above (docs/migrating.md).
from luigi.util import copies  # noqa: E402
from b2batch.dispatch import DispatchableTask, dispatch  # noqa: E402
from b2batch.generators import ParameterGenerator, ZippedParameterGenerator, expand_parameters  # noqa: E402

__version__ = "0.1.0"

__all__ = sorted({
    *_luigi_all,
    *PARAMETER_CLASSES,
    "B2BatchError", "BatchProcess", "BatchSystemError", "ExternalTask", "JobStatus", "LocalTarget",
    "OutputPathError", "SchedulerCommandError", "SettingError", "Task", "WrapperTask", "clear_setting",
    "get_setting", "inherits", "on_temporary_files", "process", "requires", "set_setting",
    "copies", "DispatchableTask", "dispatch", "ParameterGenerator", "ZippedParameterGenerator", "expand_parameters",
})
