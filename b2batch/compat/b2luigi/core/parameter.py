"""``b2luigi.core.parameter``: ``wrap_parameter``, ``BoolParameter`` and ``BatchIntParameter``, b2batch's."""

from b2batch.luigi_frontend.b2luigi_parameters import BatchIntParameter, wrap_parameter
from b2batch.luigi_frontend.parameters import BoolParameter

__all__ = ["BatchIntParameter", "BoolParameter", "wrap_parameter"]
