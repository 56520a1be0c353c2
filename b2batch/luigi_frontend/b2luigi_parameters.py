"""b2luigi's parameter names that luigi does not have: ``BatchIntParameter`` and ``wrap_parameter``."""

from __future__ import annotations

from typing import Any

from b2batch import IntParameter


class BatchIntParameter(IntParameter):
    """An integer parameter for tasks grouped into one job (``grouping=True``): as in b2luigi, luigi does
    not batch its values as a range (``next_in_enumeration`` is ``None``), so each value stays a task."""

    def next_in_enumeration(self, value: Any) -> None:
        return None


def wrap_parameter() -> None:
    """b2luigi patches luigi's ``Parameter`` here so that it takes ``hashed=True``. b2batch's parameter
    classes (``b2batch.Parameter``, ``b2batch.IntParameter``, ...) take ``hashed``, ``hash_function`` and
    ``hidden`` already and luigi is left as it is, so there is nothing to do."""
