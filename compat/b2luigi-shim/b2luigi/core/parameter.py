"""``b2luigi.core.parameter``: ``wrap_parameter``, ``BoolParameter`` and ``BatchIntParameter``, b2batch's."""

from b2batch import BatchIntParameter, wrap_parameter
from b2batch import BoolParameter

__all__ = ["BatchIntParameter", "BoolParameter", "wrap_parameter"]
