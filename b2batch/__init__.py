"""b2batch: run a luigi workflow locally or as jobs on HTCondor, LSF, Slurm, Sun Grid Engine or locally.

luigi's public API is available here too, so ``import b2batch as luigi`` (or ``as b2luigi``) works;
b2batch's own task classes, parameters and helpers replace luigi's of the same name. Every name is listed
explicitly below (``tests/package/test_api.py`` checks that luigi's ``__all__`` is covered) and imported when first
used, so that ``import b2batch.emulators`` or ``import b2batch.engine`` does not load luigi.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from b2batch.lazy_names import lazy_names


__version__ = "0.1.0"

#: Where each public name comes from.
_SOURCES = {
    "luigi": ("Config", "DynamicRequirements", "Event", "LuigiStatusCode", "RPCError", "RemoteScheduler", "Target",
              "auto_namespace", "build", "configuration", "event", "interface", "local_target", "namespace",
              "parameter", "range", "rpc", "run", "target"),  # task: b2batch's own module, see _SUBMODULES
    "b2batch.luigi_frontend.parameters": (
        "BoolParameter", "ChoiceListParameter", "ChoiceParameter", "DateHourParameter", "DateIntervalParameter",
        "DateMinuteParameter", "DateParameter", "DateSecondParameter", "DictParameter", "EnumListParameter",
        "EnumParameter", "FloatParameter", "IntParameter", "ListParameter", "MonthParameter", "NumericalParameter",
        "OptionalBoolParameter", "OptionalChoiceParameter", "OptionalDictParameter", "OptionalFloatParameter",
        "OptionalIntParameter", "OptionalListParameter", "OptionalNumericalParameter", "OptionalParameter",
        "OptionalPathParameter", "OptionalStrParameter", "OptionalTupleParameter", "Parameter", "PathParameter",
        "StrParameter", "TaskParameter", "TimeDeltaParameter", "TupleParameter", "YearParameter"),
    "luigi.util": ("copies",),
    "b2batch.luigi_frontend.b2luigi_parameters": ("BatchIntParameter", "wrap_parameter"),
    "b2batch.luigi_frontend.dispatching": ("DispatchableTask", "dispatch"),
    "b2batch.luigi_frontend.generators": ("ParameterGenerator", "ZippedParameterGenerator", "expand_parameters"),
    "b2batch.engine": ("JobStatus",),
    "b2batch.engine.preemption": ("preempted",),
    "b2batch.errors": ("B2BatchError", "BatchSystemError", "OutputPathError", "SchedulerCommandError",
                       "SettingError"),
    "b2batch.luigi_frontend.batch_process": ("BatchProcess",),
    "b2batch.luigi_frontend.workflow": ("process",),
    "b2batch.settings": ("clear_setting", "get_setting", "set_setting"),
    "b2batch.pool": ("Pool",),
    "b2batch.remote": ("RemoteTarget", "WebDAVSystem", "WebDAVTarget", "XRootDSystem", "XRootDTarget"),
    "b2batch.luigi_frontend.task": ("ExternalTask", "LocalTarget", "Task", "WrapperTask", "inherits",
                                    "on_temporary_files", "requires"),
}
_MODULE_OF = {name: module for module, names in _SOURCES.items() for name in names}

#: luigi's ``task`` module is offered as b2batch's own ``b2batch.luigi_frontend.task`` (its Task classes replace
#: luigi's): name here -> module.
_SUBMODULES = {"task": "b2batch.luigi_frontend.task"}

__all__ = sorted([*_MODULE_OF, *_SUBMODULES, "__version__"])

#: b2batch's public modules beside the names above: the API for code built on b2batch (the b2luigi shim in
#: ``compat/b2luigi-shim``, batch-system plugins). Each offers the names of its ``__all__``, documented there;
#: anything else of b2batch (other modules, names outside ``__all__``, names with a leading ``_``) may change
#: without notice. ``tests/dropins/b2luigi/test_b2luigi_layer_imports.py`` holds the shim to this list.
PUBLIC_MODULES = ("b2batch.settings", "b2batch.systems", "b2batch.remote", "b2batch.jobscript.base_folder",
                  "b2batch.jobscript.container_command",
                  "b2batch.luigi_frontend.layout", "b2batch.luigi_frontend.task_job_files",
                  "b2batch.luigi_frontend.batch_worker", "b2batch.luigi_frontend.temporary",
                  "b2batch.luigi_frontend.task_on_node", "b2batch.luigi_frontend.flags", "b2batch.luigi_frontend.generators",
                  "b2batch.luigi_frontend.b2luigi_cli")


__getattr__, __dir__ = lazy_names(__name__, globals(), _MODULE_OF, _SUBMODULES)


if TYPE_CHECKING:  # what type checkers and IDEs see
    from luigi import (
        Config,
        DynamicRequirements,
        Event,
        LuigiStatusCode,
        RemoteScheduler,
        RPCError,
        Target,
        auto_namespace,
        build,
        configuration,
        event,
        interface,
        local_target,
        namespace,
        parameter,
        range,
        rpc,
        run,
        target,
    )

    from luigi.util import copies

    from b2batch.luigi_frontend.b2luigi_parameters import BatchIntParameter, wrap_parameter
    from b2batch.luigi_frontend.dispatching import DispatchableTask, dispatch
    from b2batch.engine import JobStatus
    from b2batch.engine.preemption import preempted
    from b2batch.luigi_frontend.generators import ParameterGenerator, ZippedParameterGenerator, expand_parameters
    from b2batch.errors import B2BatchError, BatchSystemError, OutputPathError, SchedulerCommandError, SettingError
    from b2batch.luigi_frontend.batch_process import BatchProcess
    from b2batch.luigi_frontend.workflow import process
    from b2batch.luigi_frontend.parameters import (
        BoolParameter,
        ChoiceListParameter,
        ChoiceParameter,
        DateHourParameter,
        DateIntervalParameter,
        DateMinuteParameter,
        DateParameter,
        DateSecondParameter,
        DictParameter,
        EnumListParameter,
        EnumParameter,
        FloatParameter,
        IntParameter,
        ListParameter,
        MonthParameter,
        NumericalParameter,
        OptionalBoolParameter,
        OptionalChoiceParameter,
        OptionalDictParameter,
        OptionalFloatParameter,
        OptionalIntParameter,
        OptionalListParameter,
        OptionalNumericalParameter,
        OptionalParameter,
        OptionalPathParameter,
        OptionalStrParameter,
        OptionalTupleParameter,
        Parameter,
        PathParameter,
        StrParameter,
        TaskParameter,
        TimeDeltaParameter,
        TupleParameter,
        YearParameter,
    )
    from b2batch.remote import RemoteTarget, WebDAVSystem, WebDAVTarget, XRootDSystem, XRootDTarget
    from b2batch.settings import clear_setting, get_setting, set_setting
    from b2batch.luigi_frontend.task import (
        ExternalTask,
        LocalTarget,
        Task,
        WrapperTask,
        inherits,
        on_temporary_files,
        requires,
    )
