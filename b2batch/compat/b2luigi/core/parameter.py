"""``b2luigi.core.parameter``: ``wrap_parameter``, ``BoolParameter`` and ``BatchIntParameter``, b2batch's."""

from b2batch.b2luigi_parameters import BatchIntParameter, wrap_parameter
from b2batch.parameters import BoolParameter

__all__ = ["BatchIntParameter", "BoolParameter", "wrap_parameter"]
