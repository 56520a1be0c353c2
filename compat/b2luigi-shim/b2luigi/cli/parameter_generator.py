"""``b2luigi.cli.parameter_generator``: the generators of ``parameters.py`` (b2batch's, the same classes as
``b2luigi.ParameterGenerator`` and ``b2luigi.ZippedParameterGenerator``)."""

from b2batch import ParameterGenerator, ZippedParameterGenerator

__all__ = ["ParameterGenerator", "ZippedParameterGenerator"]
