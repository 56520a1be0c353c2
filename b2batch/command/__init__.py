"""The ``b2batch`` console script's own commands."""
