"""luigi's parameter classes with the path options ``hashed`` and ``hidden`` (:class:`_PathOptions`),
under luigi's names. Each is a subclass of luigi's class of the same name, so luigi treats it as its own."""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable
from typing import Any

import luigi.parameter

from b2batch.luigi_frontend.seam import warn_as_luigi_class


# --- parameters with path options -------------------------------------------------------------------------

class _PathOptions:
    """Adds the options ``hashed`` (a hash of the value in output paths), ``hash_function`` (a function of
    one argument, the value, that gives the text put into output paths instead; it implies ``hashed``),
    ``hidden`` (left out of paths) and b2luigi's ``grouping`` (tasks that differ only in such parameters
    share batch jobs, up to the setting ``max_grouping_size``; see
    :mod:`b2batch.luigi_frontend.grouping`) with ``grouping_function`` (accepted, without effect: b2batch
    never packs values)."""

    def __init__(self, *args: Any, hashed: bool = False, hidden: bool = False,
                 hash_function: Callable[[Any], str] | None = None, grouping: bool = False,
                 grouping_function: Callable[..., Any] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if hash_function is not None:
            if not callable(hash_function) or _positional_arity(hash_function) != 1:
                raise TypeError(f"hash_function must be a function of one argument (the parameter's value), "
                                f"not {hash_function!r}.")
        if grouping not in (True, False):
            raise TypeError(f"grouping must be True or False, not {grouping!r}.")
        if grouping_function is not None and not callable(grouping_function):
            raise TypeError(f"grouping_function must be a function, not {grouping_function!r}.")
        self.hashed = hashed or hash_function is not None
        self.hashed_given = bool(hashed)  # b2luigi 1.3 (setting b2luigi_hashing): hash_function needs hashed=True
        self.hash_function = hash_function
        self.hidden = hidden
        self.grouping = bool(grouping)
        self.grouping_function = grouping_function


    @property
    def serialize_hashed(self) -> Callable[[Any], str]:
        """b2luigi's ``serialize_hashed(value)``, which only hashed parameters have (``hasattr`` tells): the
        text for ``value``, ``hash_function(value)`` when the parameter has one, else ``hashed_`` and the md5
        of ``str(value)``."""
        if not self.hashed:
            raise AttributeError(f"{type(self).__name__} without hashed=True has no serialize_hashed")
        return self._serialize_hashed

    def _serialize_hashed(self, value: Any) -> str:
        if self.hash_function is not None:
            return self.hash_function(value)
        return "hashed_" + hashlib.md5(str(value).encode()).hexdigest()


def _positional_arity(function: Callable[..., Any]) -> int:
    """How many arguments ``function`` takes without defaults (1 for a one-argument function)."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: trust it
        return 1
    return sum(1 for p in parameters if p.default is p.empty
               and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


def with_path_options(base: type) -> type:
    """A subclass of the luigi parameter class ``base``, of the same name, with the path options."""
    return type(base.__name__, (_PathOptions, base), {"__module__": __name__, "__doc__": base.__doc__})


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
