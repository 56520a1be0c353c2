"""luigi's parameter classes with the path options ``hashed`` and ``hidden`` (see :mod:`b2batch.luigi_frontend.task`),
under luigi's names. Each is a subclass of luigi's class of the same name, so luigi treats it as its own."""

from __future__ import annotations

import luigi.parameter

from b2batch.luigi_frontend.seam import warn_as_luigi_class
from b2batch.luigi_frontend.task import with_path_options

BoolParameter = with_path_options(luigi.parameter.BoolParameter)
ChoiceListParameter = with_path_options(luigi.parameter.ChoiceListParameter)
ChoiceParameter = with_path_options(luigi.parameter.ChoiceParameter)
DateHourParameter = with_path_options(luigi.parameter.DateHourParameter)
DateIntervalParameter = with_path_options(luigi.parameter.DateIntervalParameter)
DateMinuteParameter = with_path_options(luigi.parameter.DateMinuteParameter)
DateParameter = with_path_options(luigi.parameter.DateParameter)
DateSecondParameter = with_path_options(luigi.parameter.DateSecondParameter)
DictParameter = with_path_options(luigi.parameter.DictParameter)
EnumListParameter = with_path_options(luigi.parameter.EnumListParameter)
EnumParameter = with_path_options(luigi.parameter.EnumParameter)
FloatParameter = with_path_options(luigi.parameter.FloatParameter)
IntParameter = with_path_options(luigi.parameter.IntParameter)
ListParameter = with_path_options(luigi.parameter.ListParameter)
MonthParameter = with_path_options(luigi.parameter.MonthParameter)
NumericalParameter = with_path_options(luigi.parameter.NumericalParameter)
OptionalBoolParameter = with_path_options(luigi.parameter.OptionalBoolParameter)
OptionalChoiceParameter = with_path_options(luigi.parameter.OptionalChoiceParameter)
OptionalDictParameter = with_path_options(luigi.parameter.OptionalDictParameter)
OptionalFloatParameter = with_path_options(luigi.parameter.OptionalFloatParameter)
OptionalIntParameter = with_path_options(luigi.parameter.OptionalIntParameter)
OptionalListParameter = with_path_options(luigi.parameter.OptionalListParameter)
OptionalNumericalParameter = with_path_options(luigi.parameter.OptionalNumericalParameter)
OptionalParameter = with_path_options(luigi.parameter.OptionalParameter)
OptionalPathParameter = with_path_options(luigi.parameter.OptionalPathParameter)
OptionalStrParameter = with_path_options(luigi.parameter.OptionalStrParameter)
OptionalTupleParameter = with_path_options(luigi.parameter.OptionalTupleParameter)
Parameter = warn_as_luigi_class(with_path_options(luigi.parameter.Parameter), luigi.parameter.Parameter)
PathParameter = with_path_options(luigi.parameter.PathParameter)
StrParameter = with_path_options(luigi.parameter.StrParameter)
TaskParameter = with_path_options(luigi.parameter.TaskParameter)
TimeDeltaParameter = warn_as_luigi_class(with_path_options(luigi.parameter.TimeDeltaParameter),
                                         luigi.parameter.TimeDeltaParameter)
TupleParameter = with_path_options(luigi.parameter.TupleParameter)
YearParameter = with_path_options(luigi.parameter.YearParameter)

#: Every parameter class of this module, by name.
PARAMETER_CLASSES = {cls.__name__: cls for cls in (
    BoolParameter, ChoiceListParameter, ChoiceParameter, DateHourParameter, DateIntervalParameter,
    DateMinuteParameter, DateParameter, DateSecondParameter, DictParameter, EnumListParameter, EnumParameter,
    FloatParameter, IntParameter, ListParameter, MonthParameter, NumericalParameter, OptionalBoolParameter,
    OptionalChoiceParameter, OptionalDictParameter, OptionalFloatParameter, OptionalIntParameter,
    OptionalListParameter, OptionalNumericalParameter, OptionalParameter, OptionalPathParameter,
    OptionalStrParameter, OptionalTupleParameter, Parameter, PathParameter, StrParameter, TaskParameter,
    TimeDeltaParameter, TupleParameter, YearParameter,
)}
